@_exported import RoamCore
