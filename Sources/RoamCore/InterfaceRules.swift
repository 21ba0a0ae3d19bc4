import Glibc

/// Rules that give interfaces attributes by name: the contents of an interfaces file.
///
/// The file has one rule per line: a shell-style name pattern (`*`, `?`, `[...]`), then
/// attributes in the form of ``InterfaceAttributes``. `#` starts a comment. Every rule whose
/// pattern matches an interface applies, in file order, so a later line overrides an earlier
/// one for the attributes it sets:
///
/// ```
/// # pattern   attributes
/// wl*         type=wifi
/// wwan*       type=cellular                 # expensive by default
/// usb*        type=wiredEthernet expensive  # a tethered phone
/// wlp3s0      constrained                   # Low Data Mode on this Wi-Fi
/// ```
///
/// These rules override both the kernel's classification and alias tags.
public struct InterfaceRules: Sendable, Hashable {
    /// One line of the file.
    public struct Rule: Sendable, Hashable {
        public var pattern: String
        public var attributes: InterfaceAttributes
        public init(pattern: String, attributes: InterfaceAttributes) {
            self.pattern = pattern
            self.attributes = attributes
        }
    }

    public var rules: [Rule]

    public init(_ rules: [Rule] = []) {
        self.rules = rules
    }

    /// Why the text of an interfaces file was refused: every line with a problem (the first
    /// 20, and how many more), one `FILE:LINE: error:` line each.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        public var description: String
    }

    /// Parses the text of an interfaces file. `source` names the file in error messages.
    public init(parsing text: String, source: String = "<interfaces>") throws(ParseError) {
        var rules: [Rule] = []
        var problems: [String] = []
        for (number, rawLine) in textLines(text).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let pattern = words.first else { continue }
            let rest = line[pattern.endIndex...]
            do throws(InterfaceAttributes.ParseError) {
                let attributes = try InterfaceAttributes(parsing: rest)
                if attributes.isEmpty {
                    problems.append("\(source):\(number + 1): error: no attributes for '\(escapedForMessage(pattern))'; write for example '\(escapedForMessage(pattern)) type=wifi'")
                } else {
                    rules.append(Rule(pattern: String(pattern), attributes: attributes))
                }
            } catch {
                problems.append("\(source):\(number + 1): error: \(escapedForMessage(error.description))")
            }
        }
        if !problems.isEmpty {
            // A file of garbage has a problem on every line: show the first ones, count the rest.
            let shown = problems.prefix(20).joined(separator: "\n")
            let more = problems.count > 20 ? "\n\(source): error: \(problems.count - 20) more lines with problems" : ""
            throw ParseError(description: shown + more)
        }
        self.rules = rules
    }

    /// The attributes the rules give the interface named `name`.
    public func attributes(forInterfaceNamed name: String) -> InterfaceAttributes {
        var result = InterfaceAttributes()
        for rule in rules where fnmatch(rule.pattern, name, 0) == 0 {
            result = result.overridden(by: rule.attributes)
        }
        return result
    }
}

