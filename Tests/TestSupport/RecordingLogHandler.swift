import Logging
import Synchronization

/// A swift-log handler that keeps every message, for tests that check what a library logged.
public struct RecordingLogHandler: LogHandler {
    public struct Entry: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: Logger.Metadata
    }

    /// The messages logged through every logger made by ``logger(label:)`` of one recorder.
    public final class Recorder: Sendable {
        private let entries = Mutex<[Entry]>([])

        public init() {}

        /// A logger that records here, at every level.
        public func logger(label: String = "test") -> Logger {
            Logger(label: label) { _ in RecordingLogHandler(recorder: self) }
        }

        public var recorded: [Entry] { entries.withLock { $0 } }

        func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }
    }

    private let recorder: Recorder
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        recorder.append(Entry(level: event.level, message: "\(event.message)",
                              metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
    }
}
