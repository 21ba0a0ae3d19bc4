import CRoamBus
import Glibc
import Netlink
import RoamCore
import RoamSystem
import Synchronization

/// Why a D-Bus connection of the daemon failed.
package struct BusError: Error, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }

    /// `what` failed with sd-bus's negative errno `result`.
    static func failed(_ what: String, _ result: Int32) -> BusError {
        BusError("\(what): \(String(cString: strerror(-result)))")
    }
}

/// A value D-Bus carries, of the types the daemon sends and reads.
package enum BusValue: Equatable, Sendable {
    case string(String)
    case boolean(Bool)
    case int32(Int32)
    case uint32(UInt32)
    case uint64(UInt64)
    case objectPath(String)
    case strings([String])
    case objectPaths([String])

    /// Its D-Bus signature.
    package var signature: String {
        switch self {
        case .string: "s"
        case .boolean: "b"
        case .int32: "i"
        case .uint32: "u"
        case .uint64: "t"
        case .objectPath: "o"
        case .strings: "as"
        case .objectPaths: "ao"
        }
    }
}

/// One connection to a D-Bus bus through sd-bus (loaded at run time: see CRoamBus), owned by a
/// thread of its own: every sd-bus call happens there, as sd-bus objects are not thread-safe.
/// Other threads hand it work with ``perform(_:)``.
package final class BusConnection: @unchecked Sendable {
    /// Which bus.
    package enum Bus: String, Sendable, CaseIterable {
        /// The system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else /run/dbus/system_bus_socket).
        case system
        /// The user's session bus (`DBUS_SESSION_BUS_ADDRESS`, else $XDG_RUNTIME_DIR/bus).
        case session
    }

    /// A received message, valid only during the handler it is handed to.
    package struct Message {
        let pointer: OpaquePointer

        package var path: String { roam_bus_message_get_path(pointer).map { String(cString: $0) } ?? "" }
        package var interface: String { roam_bus_message_get_interface(pointer).map { String(cString: $0) } ?? "" }
        package var member: String { roam_bus_message_get_member(pointer).map { String(cString: $0) } ?? "" }
        package var sender: String { roam_bus_message_get_sender(pointer).map { String(cString: $0) } ?? "" }
        package var signature: String { roam_bus_message_get_signature(pointer, 1).map { String(cString: $0) } ?? "" }
        package var isMethodCall: Bool {
            var type: UInt8 = 0
            return roam_bus_message_get_type(pointer, &type) >= 0 && Int(type) == Int(ROAM_BUS_MESSAGE_METHOD_CALL)
        }

        /// The sender's effective user id, as the bus daemon recorded it when the sender connected.
        package var senderUID: uid_t? {
            var uid: uid_t = 0
            return roam_bus_sender_euid(pointer, &uid) >= 0 ? uid : nil
        }

        /// Reads the next argument, a string or an object path.
        package func readString(_ type: Character = "s") -> String? {
            var value: UnsafePointer<CChar>?
            guard roam_bus_message_read_basic(pointer, CChar(type.asciiValue!), &value) > 0, let value else { return nil }
            return String(cString: value)
        }

        /// Reads the next argument, an unsigned 32-bit integer.
        package func readUInt32() -> UInt32? {
            var value: UInt32 = 0
            return roam_bus_message_read_basic(pointer, CChar(UInt8(ascii: "u")), &value) > 0 ? value : nil
        }

        /// Reads the next argument, a boolean.
        package func readBool() -> Bool? {
            var value: Int32 = 0
            return roam_bus_message_read_basic(pointer, CChar(UInt8(ascii: "b")), &value) > 0 ? value != 0 : nil
        }

        /// Reads the next argument, a double.
        package func readDouble() -> Double? {
            var value: Double = 0
            return roam_bus_message_read_basic(pointer, CChar(UInt8(ascii: "d")), &value) > 0 ? value : nil
        }

        /// Enters a container (`a`, `r` for a struct, `e`, `v`) holding `contents`; false when
        /// the next argument is not one, or at the end of an array.
        package func enter(_ type: Character, _ contents: String) -> Bool {
            roam_bus_message_enter_container(pointer, CChar(type.asciiValue!), contents) > 0
        }

        /// Leaves the container entered last.
        package func exit() -> Bool {
            roam_bus_message_exit_container(pointer) >= 0
        }

        /// Skips the next arguments, of `signature`.
        package func skip(_ signature: String) -> Bool {
            roam_bus_message_skip(pointer, signature) >= 0
        }

        /// Reads an array of object paths.
        package func readObjectPaths() -> [String]? {
            guard roam_bus_message_enter_container(pointer, CChar(UInt8(ascii: "a")), "o") > 0 else { return nil }
            var paths: [String] = []
            while let path = readString("o") { paths.append(path) }
            return roam_bus_message_exit_container(pointer) >= 0 ? paths : nil
        }

        /// Enters a variant holding `signature`; false (and nothing read) if it holds another.
        package func enterVariant(_ signature: String) -> Bool {
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            guard roam_bus_message_peek_type(pointer, &type, &contents) > 0, type == CChar(UInt8(ascii: "v")),
                  let contents, String(cString: contents) == signature else { return false }
            return roam_bus_message_enter_container(pointer, CChar(UInt8(ascii: "v")), signature) > 0
        }

        /// Reads `a{sv}` and keeps the entries `read` took (it is handed the key, inside the
        /// entry's variant when `signature` matched; entries of other types are skipped).
        package func readProperties(_ wanted: [String: String], _ read: (String, Message) -> Void) -> Bool {
            guard roam_bus_message_enter_container(pointer, CChar(UInt8(ascii: "a")), "{sv}") > 0 else { return false }
            while roam_bus_message_enter_container(pointer, CChar(UInt8(ascii: "e")), "sv") > 0 {
                guard let key = readString() else { return false }
                if let signature = wanted[key], enterVariant(signature) {
                    read(key, self)
                    _ = roam_bus_message_exit_container(pointer)
                } else if roam_bus_message_skip(pointer, "v") < 0 {
                    return false
                }
                guard roam_bus_message_exit_container(pointer) >= 0 else { return false }
            }
            return roam_bus_message_exit_container(pointer) >= 0
        }
    }

    /// A message being built.
    package struct OutgoingMessage {
        let pointer: OpaquePointer

        /// Appends one value.
        @discardableResult
        package func append(_ value: BusValue) -> Bool {
            switch value {
            case .string(let text): return roam_bus_message_append_string(pointer, text) >= 0
            case .objectPath(let text): return text.withCString { roam_bus_message_append_basic(pointer, CChar(UInt8(ascii: "o")), $0) >= 0 }
            case .boolean(let flag):
                var value: Int32 = flag ? 1 : 0
                return roam_bus_message_append_basic(pointer, CChar(UInt8(ascii: "b")), &value) >= 0
            case .int32(var number): return roam_bus_message_append_basic(pointer, CChar(UInt8(ascii: "i")), &number) >= 0
            case .uint32(var number): return roam_bus_message_append_basic(pointer, CChar(UInt8(ascii: "u")), &number) >= 0
            case .uint64(var number): return roam_bus_message_append_basic(pointer, CChar(UInt8(ascii: "t")), &number) >= 0
            case .strings(let texts):
                return container("a", "s") { texts.allSatisfy { append(.string($0)) } }
            case .objectPaths(let paths):
                return container("a", "o") { paths.allSatisfy { append(.objectPath($0)) } }
            }
        }

        /// Appends `value` as a variant.
        @discardableResult
        package func appendVariant(_ value: BusValue) -> Bool {
            container("v", value.signature) { append(value) }
        }

        /// Appends `a{sv}`.
        @discardableResult
        package func appendProperties(_ properties: [(String, BusValue)]) -> Bool {
            container("a", "{sv}") {
                properties.allSatisfy { name, value in
                    container("e", "sv") { append(.string(name)) && appendVariant(value) }
                }
            }
        }

        /// Appends a container of `type` (`a`, `v`, `e`) holding `contents`, filled by `body`.
        @discardableResult
        package func container(_ type: Character, _ contents: String, _ body: () -> Bool) -> Bool {
            roam_bus_message_open_container(pointer, CChar(type.asciiValue!), contents) >= 0 && body()
                && roam_bus_message_close_container(pointer) >= 0
        }
    }

    /// What a handler did with a method call.
    package enum Handled {
        /// Not for it: sd-bus answers (an unknown method or object).
        case unhandled
        /// Answered with these values.
        case reply([BusValue])
        /// Answered by `build` filling the reply.
        case replyBuilt((OutgoingMessage) -> Bool)
        /// Answered with a D-Bus error.
        case error(name: String, message: String)
    }

    package let bus: Bus
    private var connection: OpaquePointer?
    private let wakeup: EventSignal
    private let stopping = Atomic<Bool>(false)
    private let work = Mutex<[@Sendable (BusConnection) -> Void]>([])
    private var thread: PinnedThread?
    private var slots: [OpaquePointer?] = []
    private var handlers: [Int: (Message) -> Handled] = [:]
    private var nextHandler = 0
    /// Why the connection ended by itself (the bus went away), if it did.
    package var failure: BusError? { failed.withLock { $0 } }
    private let failed = Mutex<BusError?>(nil)

    /// Connects to `bus`. The connection serves nothing until ``start()``.
    ///
    /// - Throws: ``BusError`` when libsystemd cannot be loaded or the bus cannot be reached.
    /// How long a call waits for its answer: the name asked for, NetworkManager's properties.
    package static let callTimeout: Duration = .seconds(5)

    package init(bus: Bus) throws(BusError) {
        if let failure = roam_bus_load() {
            throw BusError("D-Bus needs systemd's libsystemd.so.0: \(String(cString: failure))")
        }
        self.bus = bus
        var connection: OpaquePointer?
        let result = bus == .system ? roam_bus_open_system(&connection) : roam_bus_open_user(&connection)
        guard result >= 0, connection != nil else {
            throw BusError.failed("cannot connect to the \(bus.rawValue) bus (\(Self.address(of: bus)))", result)
        }
        self.connection = connection
        // A bus that accepts the connection but never answers (a wedged bus daemon) fails the
        // first call within this, not sd-bus's 25 s: the daemon's start-up (Hello, the name)
        // waits for its answers with nothing else to stop it.
        _ = roam_bus_set_method_call_timeout(connection, UInt64(Self.callTimeout.components.seconds) * 1_000_000)
        do {
            wakeup = try EventSignal()
        } catch {
            roam_bus_flush_close_unref(connection)
            throw BusError("eventfd: \(error)")
        }
    }

    deinit {
        for slot in slots { roam_bus_slot_unref(slot) }
        roam_bus_flush_close_unref(connection)
    }

    /// Where `bus` is, for messages.
    static func address(of bus: Bus) -> String {
        let variable = bus == .system ? "DBUS_SYSTEM_BUS_ADDRESS" : "DBUS_SESSION_BUS_ADDRESS"
        if let value = getenv(variable).map({ String(cString: $0) }), !value.isEmpty {
            return "\(variable)=\(escapedForMessage(value, maximumLength: 120))"
        }
        return bus == .system ? "/run/dbus/system_bus_socket" : "$XDG_RUNTIME_DIR/bus"
    }

    /// This connection's unique name on the bus (`:1.42`).
    package var uniqueName: String? {
        var name: UnsafePointer<CChar>?
        return roam_bus_get_unique_name(connection, &name) >= 0 ? name.map { String(cString: $0) } : nil
    }

    /// Asks for a well-known name; before ``start()`` only.
    ///
    /// - Throws: ``BusError`` when the bus refuses it (the policy does not allow this user to
    ///   own it, or another connection has it).
    package func requestName(_ name: String) throws(BusError) {
        let result = roam_bus_request_name(connection, name, 0)
        guard result >= 0 else {
            let reason = result == -EEXIST ? "another connection owns it (is another roam daemon running?)"
                : result == -ETIMEDOUT ? "the bus did not answer within \(Self.callTimeout.components.seconds) s (is its daemon wedged?)"
                : result == -EACCES || result == -EPERM ? "the bus's policy does not let this user own it (install the D-Bus policy: make install)"
                : String(cString: strerror(-result))
            throw BusError("cannot own \(name) on the \(bus.rawValue) bus: \(reason)")
        }
    }

    /// Has `handler` answer the method calls to `path` and every object below it; before
    /// ``start()`` or on the connection's thread.
    package func handle(objectsUnder path: String, _ handler: @escaping (Message) -> Handled) throws(BusError) {
        let id = nextHandler
        nextHandler += 1
        handlers[id] = handler
        var slot: OpaquePointer?
        let result = roam_bus_add_fallback(connection, &slot, path, { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            return Unmanaged<HandlerBox>.fromOpaque(userdata).takeUnretainedValue().run(Message(pointer: message))
        }, box(id))
        guard result >= 0 else { throw BusError.failed("cannot serve \(path)", result) }
        slots.append(slot)
    }

    /// Calls `handler` with each signal matching the arguments (nil: any); before ``start()``
    /// or on the connection's thread.
    package func watch(sender: String?, path: String?, interface: String?, member: String?, _ handler: @escaping (Message) -> Void) throws(BusError) {
        let id = nextHandler
        nextHandler += 1
        handlers[id] = { message in
            handler(message)
            return .unhandled
        }
        var slot: OpaquePointer?
        let result = roam_bus_match_signal(connection, &slot, sender, path, interface, member, { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            _ = Unmanaged<HandlerBox>.fromOpaque(userdata).takeUnretainedValue().run(Message(pointer: message))
            return 0
        }, box(id))
        guard result >= 0 else { throw BusError.failed("cannot watch \(member ?? "signals")", result) }
        slots.append(slot)
    }

    /// The boxes handed to sd-bus as user data; they live as long as the connection.
    private var boxes: [HandlerBox] = []

    private final class HandlerBox {
        unowned let connection: BusConnection
        let id: Int
        init(connection: BusConnection, id: Int) {
            self.connection = connection
            self.id = id
        }
        func run(_ message: Message) -> Int32 { connection.dispatch(id, message) }
    }

    private func box(_ id: Int) -> UnsafeMutableRawPointer {
        let box = HandlerBox(connection: self, id: id)
        boxes.append(box)
        return Unmanaged.passUnretained(box).toOpaque()
    }

    private func dispatch(_ id: Int, _ message: Message) -> Int32 {
        guard let handler = handlers[id] else { return 0 }
        let handled = handler(message)
        guard message.isMethodCall else { return 0 }
        var reply: OpaquePointer?
        switch handled {
        case .unhandled:
            return 0
        case .reply(let values):
            guard roam_bus_message_new_method_return(message.pointer, &reply) >= 0, let reply else { return -ENOMEM }
            guard values.allSatisfy({ OutgoingMessage(pointer: reply).append($0) }) else {
                roam_bus_message_unref(reply)
                return sendError(to: message, "org.freedesktop.DBus.Error.Failed", "the answer could not be encoded")
            }
        case .replyBuilt(let build):
            guard roam_bus_message_new_method_return(message.pointer, &reply) >= 0, let reply else { return -ENOMEM }
            guard build(OutgoingMessage(pointer: reply)) else {
                roam_bus_message_unref(reply)
                return sendError(to: message, "org.freedesktop.DBus.Error.Failed", "the answer could not be encoded")
            }
        case .error(let name, let text):
            return sendError(to: message, name, text)
        }
        defer { roam_bus_message_unref(reply) }
        let sent = roam_bus_send(connection, reply, nil)
        return sent < 0 ? sent : 1
    }

    private func sendError(to message: Message, _ name: String, _ text: String) -> Int32 {
        var reply: OpaquePointer?
        guard roam_bus_message_new_method_error(message.pointer, &reply, name, text) >= 0, let reply else { return -ENOMEM }
        defer { roam_bus_message_unref(reply) }
        let sent = roam_bus_send(connection, reply, nil)
        return sent < 0 ? sent : 1
    }

    /// Sends a signal from `path`; on the connection's thread.
    @discardableResult
    package func emit(path: String, interface: String, member: String, _ build: (OutgoingMessage) -> Bool) -> Bool {
        var message: OpaquePointer?
        guard roam_bus_message_new_signal(connection, &message, path, interface, member) >= 0, let message else { return false }
        defer { roam_bus_message_unref(message) }
        return build(OutgoingMessage(pointer: message)) && roam_bus_send(connection, message, nil) >= 0
    }

    /// Calls a method and reads its reply with `read`; on the connection's thread (or before
    /// ``start()``). Waits at most `timeout`.
    package func call<T>(destination: String, path: String, interface: String, member: String, timeout: Duration = .seconds(5),
                         arguments: [BusValue] = [], read: (Message) -> T?) throws(BusError) -> T {
        var message: OpaquePointer?
        guard roam_bus_message_new_method_call(connection, &message, destination, path, interface, member) >= 0, let message else {
            throw BusError("cannot call \(interface).\(member)")
        }
        defer { roam_bus_message_unref(message) }
        guard arguments.allSatisfy({ OutgoingMessage(pointer: message).append($0) }) else { throw BusError("cannot encode \(member)'s arguments") }
        var reply: OpaquePointer?
        var name = [CChar](repeating: 0, count: 256), text = [CChar](repeating: 0, count: 512)
        let microseconds = UInt64(timeout.components.seconds) * 1_000_000 + UInt64(timeout.components.attoseconds / 1_000_000_000_000)
        let result = roam_bus_call(connection, message, microseconds, &reply, &name, name.count, &text, text.count)
        guard result >= 0, let reply else {
            func string(_ buffer: [CChar]) -> String {
                String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            let detail = name[0] != 0 ? "\(string(name)): \(string(text))" : String(cString: strerror(-result))
            throw BusError("\(destination) \(path) \(interface).\(member): \(escapedForMessage(detail, maximumLength: 300))")
        }
        defer { roam_bus_message_unref(reply) }
        guard let value = read(Message(pointer: reply)) else {
            throw BusError("\(destination) \(path) \(interface).\(member) answered what roam cannot read (\(Message(pointer: reply).signature))")
        }
        return value
    }

    /// Runs `body` on the connection's thread, soon.
    package func perform(_ body: @escaping @Sendable (BusConnection) -> Void) {
        work.withLock { $0.append(body) }
        wakeup.signal()
    }

    /// Starts the connection's thread: it answers calls and runs ``perform(_:)``'s work until
    /// ``stop()``, or until the bus goes away (``failure``; `ended` is called).
    package func start(name: String, ended: @escaping @Sendable (BusError) -> Void) throws(BusError) {
        do {
            thread = try PinnedThread(name: name) { [self] in
                if let error = self.loop() { ended(error) }
            }
        } catch {
            throw BusError("cannot start the D-Bus thread: \(error)")
        }
    }

    /// Ends the thread after what it was handed (signals included) is sent.
    package func stop() {
        stopping.store(true, ordering: .releasing)
        wakeup.signal()
        thread?.join()
        thread = nil
    }

    private func loop() -> BusError? {
        while true {
            // Everything sd-bus has to do now: read, dispatch, write.
            while true {
                let result = roam_bus_process(connection, nil)
                if result < 0 {
                    let error = BusError.failed("the \(bus.rawValue) bus connection ended", result)
                    failed.withLock { $0 = error }
                    return error
                }
                if result == 0 { break }
            }
            let jobs = work.withLock { jobs -> [@Sendable (BusConnection) -> Void] in
                defer { jobs = [] }
                return jobs
            }
            for job in jobs { job(self) }
            if !jobs.isEmpty { continue }
            if stopping.load(ordering: .acquiring) {
                _ = roam_bus_flush(connection)
                return nil
            }
            let descriptor = roam_bus_get_fd(connection)
            let events = roam_bus_get_events(connection)
            guard descriptor >= 0, events >= 0 else {
                let error = BusError.failed("the \(bus.rawValue) bus connection ended", descriptor < 0 ? descriptor : events)
                failed.withLock { $0 = error }
                return error
            }
            var timeout: UInt64 = 0
            var milliseconds: Int32 = -1
            if roam_bus_get_timeout(connection, &timeout) > 0, timeout != UInt64.max {
                let now = UInt64(MonotonicInstant.now.nanoseconds / 1000)
                milliseconds = timeout <= now ? 0 : Int32(clamping: (timeout - now + 999) / 1000)
            }
            var entries = [pollfd(fd: descriptor, events: Int16(events), revents: 0), wakeup.pollEntry]
            _ = poll(&entries, 2, milliseconds)
            if entries[1].revents != 0 { _ = wakeup.reset() }
        }
    }
}
