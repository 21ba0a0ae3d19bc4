// Helpers for text that comes from outside (files, flags) and goes back out in messages.

/// `32 MiB`, `64 KiB` or `100 bytes`.
package func byteCountDescription(_ count: Int) -> String {
    if count >= 1 << 20, count % (1 << 20) == 0 { return "\(count >> 20) MiB" }
    if count >= 1 << 10, count % (1 << 10) == 0 { return "\(count >> 10) KiB" }
    return "\(count) bytes"
}

/// The lines of `text`: split at LF, CR LF or CR (and NEL, LS, PS), as YAML counts lines, so
/// that a file written on Windows has the same lines, and line numbers, as on Linux.
package func textLines(_ text: String) -> [Substring] {
    // By UTF-8 bytes: splitting by Characters (grapheme clusters) is several times slower, and
    // a CR LF pair is one Character, which a split at "\n" would miss.
    var lines: [Substring] = []
    let bytes = text.utf8
    var start = bytes.startIndex
    var index = start
    while index != bytes.endIndex {
        let byte = bytes[index]
        var breakLength = 0
        if byte == 0x0A {
            breakLength = 1
        } else if byte == 0x0D {
            let next = bytes.index(after: index)
            breakLength = next != bytes.endIndex && bytes[next] == 0x0A ? 2 : 1
        } else if byte == 0xC2 || byte == 0xE2 {
            // NEL is C2 85; LS and PS are E2 80 A8 and E2 80 A9.
            let rest = bytes[index...].prefix(3)
            if rest.starts(with: [0xC2, 0x85]) { breakLength = 2 }
            if rest.elementsEqual([0xE2, 0x80, 0xA8]) || rest.elementsEqual([0xE2, 0x80, 0xA9]) { breakLength = 3 }
        }
        if breakLength > 0 {
            lines.append(text[start..<index])
            index = bytes.index(index, offsetBy: breakLength)
            start = index
        } else {
            index = bytes.index(after: index)
        }
    }
    lines.append(text[start..<bytes.endIndex])
    return lines
}

/// `text` made safe to quote in a one-line message: control characters (a newline of a block
/// scalar, a tab, a NUL) written as escapes, and anything longer than `maximumLength`
/// characters cut with `…`, so that a message about a value stays one readable line.
package func escapedForMessage(_ text: some StringProtocol, maximumLength: Int = 80) -> String {
    var result = ""
    var count = 0
    for scalar in text.unicodeScalars {
        if count >= maximumLength {
            result += "…"
            break
        }
        switch scalar {
        case "\n": result += "\\n"
        case "\r": result += "\\r"
        case "\t": result += "\\t"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
            || scalar.value == 0x2028 || scalar.value == 0x2029 || scalar.value == 0xFEFF
            || scalar.value == 0xFFFE || scalar.value == 0xFFFF:
            result += "\\u{\(String(scalar.value, radix: 16))}"
        default: result.unicodeScalars.append(scalar)
        }
        count += 1
    }
    return result
}
