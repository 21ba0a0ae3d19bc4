// The value types the decisions speak (NetworkPath, IPAddress, PathPolicy and its
// ValidationRule, PathRefusal) live in RoamCore: `import RoamDecisions` (and so
// `import Multipath`) brings them.
@_exported import RoamCore
