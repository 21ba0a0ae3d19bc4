// Duration's units and the value types live in RoamCore; `import RoamSystem` brings them too.
@_exported import RoamCore
