import Glibc
import Netlink
import RoamSystem

extension RunRegistry {
    /// A new run id: six hex digits not used by any namespace here, nor noted in root's
    /// registry or in `registry`.
    package static func newRunID(avoiding registry: RunRegistry? = nil) -> String {
        let taken = Set(NetworkNamespace.list())
        let root = try? RunRegistry.root(creating: false)
        while true {
            let id = String(UInt32.random(in: 0..<0x100_0000), radix: 16)
            let padded = String(repeating: "0", count: 6 - id.count) + id
            if !taken.contains(where: { $0.hasPrefix("roam-\(padded)-") }) && root?.directory.contains(padded) != true
                && registry?.directory.contains(padded) != true {
                return padded
            }
        }
    }
}

extension SimulatorError {
    /// A path Roam would not use as it stands, or a system call on one that failed.
    package init(_ error: SafePathError) {
        self.init(.environment, error.message)
    }
}
