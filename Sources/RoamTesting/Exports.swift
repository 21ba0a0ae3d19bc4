// A test that imports RoamTesting builds and reads scenarios with the Simulator's types
// (Scenario, LinkSpec, Impairment, RunReport) and names paths with PathMonitor's.
@_exported import PathMonitor
@_exported import Simulator
