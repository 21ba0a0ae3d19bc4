/// Where the HTTP/1.x messages are in one direction of a connection, for the toxics that act
/// on requests and responses (`http_status`, `http_truncate`). Heads are held until whole (at
/// most ``maximumHead`` bytes; a longer one, or a message whose length cannot be known, and the
/// rest of the connection pass untouched); bodies are counted by `Content-Length`. A chunked
/// body, or a response that ends at the close, passes untouched with what follows it: only the
/// message being read may be chosen.
struct HTTPFraming {
    static let maximumHead = 64 * 1024

    enum Mode: Equatable {
        /// Reading a head, held in `head`.
        case head
        /// A body of that many bytes still to pass.
        case body(Int64)
        /// A chosen response's body: that many bytes still pass, then the cut.
        case cutting(Int64)
        /// Untouched to the end of the connection.
        case passthrough
        /// Nothing passes any more (a request answered by the proxy, a response cut).
        case dropping
    }

    var mode = Mode.head
    var head: [UInt8] = []

    /// The proxy's own answer: `status`, no body, and the connection closes.
    static func answer(status: Int) -> [UInt8] {
        Array("HTTP/1.1 \(status) \(reason(status))\r\nContent-Length: 0\r\nConnection: close\r\nX-Roam-Toxic: http_status\r\n\r\n".utf8)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 408: "Request Timeout"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status"
        }
    }

    /// Requests: what passes of `bytes`, and whether a head `choose` chose is to be answered by
    /// the proxy (then nothing passes from it on).
    mutating func requests(_ bytes: [UInt8], choose: ([UInt8]) -> Bool) -> (passing: [UInt8], answered: Bool) {
        var passing: [UInt8] = []
        var offset = 0
        while offset < bytes.count {
            switch mode {
            case .dropping:
                return (passing, false)
            case .passthrough:
                passing += pendingPassthrough
                pendingPassthrough = []
                passing += bytes[offset...]
                return (passing, false)
            case .body(let remaining), .cutting(let remaining):
                let count = Int(min(Int64(bytes.count - offset), remaining))
                passing += bytes[offset..<offset + count]
                offset += count
                mode = remaining - Int64(count) == 0 ? .head : .body(remaining - Int64(count))
            case .head:
                guard takeHead(bytes, &offset) != nil else { continue }
                let whole = head
                head = []
                if choose(whole) {
                    mode = .dropping
                    return (passing, true)
                }
                passing += whole
                switch Self.framing(whole, response: false) {
                case .length(let length): mode = length > 0 ? .body(length) : .head
                case .none: mode = .head
                case .unknown: mode = .passthrough
                }
            }
        }
        return (passing, false)
    }

    /// Responses: what passes of `bytes`, and whether a chosen response was cut (the
    /// connection ends there).
    mutating func responses(_ bytes: [UInt8], cutAfter limit: Int64, choose: ([UInt8]) -> Bool) -> (passing: [UInt8], cut: Bool) {
        var passing: [UInt8] = []
        var offset = 0
        while offset < bytes.count {
            switch mode {
            case .dropping:
                return (passing, true)
            case .passthrough:
                passing += pendingPassthrough
                pendingPassthrough = []
                passing += bytes[offset...]
                return (passing, false)
            case .body(let remaining):
                let count = Int(min(Int64(bytes.count - offset), remaining))
                passing += bytes[offset..<offset + count]
                offset += count
                mode = remaining - Int64(count) == 0 ? .head : .body(remaining - Int64(count))
            case .cutting(let remaining):
                let count = Int(min(Int64(bytes.count - offset), remaining))
                passing += bytes[offset..<offset + count]
                offset += count
                if remaining - Int64(count) == 0 {
                    mode = .dropping
                    return (passing, true)
                }
                mode = .cutting(remaining - Int64(count))
            case .head:
                guard takeHead(bytes, &offset) != nil else { continue }
                let whole = head
                head = []
                passing += whole
                let framing = Self.framing(whole, response: true)
                if framing != .none, choose(whole) {
                    // A known length cuts at most there: a shorter body passes whole, then the close.
                    let cut = if case .length(let length) = framing { min(limit, length) } else { limit }
                    if cut == 0 {
                        mode = .dropping
                        return (passing, true)
                    }
                    mode = .cutting(cut)
                    continue
                }
                switch framing {
                case .length(let length): mode = length > 0 ? .body(length) : .head
                case .none: mode = .head
                case .unknown: mode = .passthrough
                }
            }
        }
        return (passing, false)
    }

    /// Moves head bytes from `bytes` (from `offset`) into ``head`` until the blank line; the
    /// offset past it once whole. A head too long leaves it and the rest untouched.
    private mutating func takeHead(_ bytes: [UInt8], _ offset: inout Int) -> Int? {
        while offset < bytes.count {
            head.append(bytes[offset])
            offset += 1
            let count = head.count
            if count >= 4, head[count - 1] == 10, head[count - 2] == 13, head[count - 3] == 10, head[count - 4] == 13 {
                // Blank lines before a request (RFC 9112 lets a server ignore them) stay in the head.
                return offset
            }
            if count > Self.maximumHead {
                mode = .passthrough
                // The head so far goes on untouched, by the caller's next turn.
                let held = head
                head = []
                pendingPassthrough = held
                return nil
            }
        }
        return nil
    }

    /// Head bytes given up on (too long), still to pass.
    var pendingPassthrough: [UInt8] = []

    enum Framing: Equatable {
        /// No body (a request without a length; a response 1xx, 204 or 304).
        case none
        case length(Int64)
        /// Chunked, or a response that ends at the close.
        case unknown
    }

    /// How the message whose head is `head` is framed.
    static func framing(_ head: [UInt8], response: Bool) -> Framing {
        let text = String(decoding: head, as: UTF8.self)
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: true)
        guard let first = lines.first else { return .unknown }
        if response {
            let words = first.split(separator: " ", maxSplits: 2)
            guard words.count >= 2, words[0].hasPrefix("HTTP/1."), let status = Int(words[1]) else { return .unknown }
            if (100..<200).contains(status) || status == 204 || status == 304 { return .none }
        }
        var length: Int64?
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = String(line[..<colon]).lowercased()
            let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed()
            if name == "transfer-encoding" { return .unknown }
            if name == "content-length" {
                guard let parsed = Int64(String(value)), parsed >= 0, length == nil || length == parsed else { return .unknown }
                length = parsed
            }
        }
        if let length { return .length(length) }
        return response ? .unknown : .none
    }
}
