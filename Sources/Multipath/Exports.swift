// The decisions (HandoverSession, the state machine, races, policies) live in RoamDecisions;
// `import Multipath` keeps bringing them, with the sockets and MPTCP that carry them out.
@_exported import RoamDecisions
