import Netlink
import RoamCore
import RoamSystem

extension InterfaceRules {
    /// The largest interfaces file read (1 MiB): far more than any machine's rules.
    public static let maximumFileSize = 1 << 20

    /// Reads and parses an interfaces file.
    public init(contentsOfFile path: String) throws(PathMonitorError) {
        let text: String
        do throws(PathMonitorError) {
            text = try readTextFile(path, maximumBytes: InterfaceRules.maximumFileSize)
        } catch {
            throw PathMonitorError(.invalidInterfacesFile, "cannot read interfaces file \(escapedForMessage(path, maximumLength: 256)): \(error.message)")
        }
        do throws(ParseError) {
            try self.init(parsing: text, source: path)
        } catch {
            throw PathMonitorError(.invalidInterfacesFile, error.description)
        }
    }
}

/// Reads a whole text file, with an error naming the cause.
func readTextFile(_ path: String, maximumBytes: Int) throws(PathMonitorError) -> String {
    do throws(SafePathError) {
        return try RoamSystem.readTextFile(atPath: path, maximumBytes: maximumBytes)
    } catch {
        throw PathMonitorError(.io, error.reason)
    }
}
