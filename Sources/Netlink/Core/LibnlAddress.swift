import CNetlink

/// Conversions between libnl's `struct nl_addr` and Roam's address types.
enum LibnlAddress {
    /// The address held by an `nl_addr`, or nil when it is absent or not IPv4/IPv6.
    static func ipAddress(_ pointer: OpaquePointer?) -> IPAddress? {
        guard let pointer, let raw = nl_addr_get_binary_addr(pointer) else { return nil }
        let length = Int(nl_addr_get_len(pointer))
        guard length == 4 || length == 16 else { return nil }
        return IPAddress(bytes: UnsafeRawBufferPointer(start: raw, count: length))
    }

    /// The prefix held by an `nl_addr` (address and prefix length).
    static func prefix(_ pointer: OpaquePointer?) -> IPPrefix? {
        guard let pointer, let address = ipAddress(pointer) else { return nil }
        return IPPrefix(address, length: Int(nl_addr_get_prefixlen(pointer)))
    }

    /// The bytes of a link-layer address.
    static func bytes(_ pointer: OpaquePointer?) -> [UInt8]? {
        guard let pointer, let raw = nl_addr_get_binary_addr(pointer) else { return nil }
        let length = Int(nl_addr_get_len(pointer))
        guard length > 0 else { return nil }
        return Array(UnsafeRawBufferPointer(start: raw, count: length))
    }

    /// Builds an `nl_addr` that the caller must release with `nl_addr_put`.
    static func make(_ address: IPAddress, prefixLength: Int? = nil) throws(NetlinkError) -> OpaquePointer {
        var bytes = address.bytes
        guard let pointer = nl_addr_build(address.family.rawValue, &bytes, bytes.count) else {
            throw NetlinkError.libnl(NLE_NOMEM, "nl_addr_build(\(address))")
        }
        nl_addr_set_prefixlen(pointer, Int32(prefixLength ?? address.bitWidth))
        return pointer
    }
}

/// Copies a C string returned by libnl, nil for a null pointer.
func libnlString(_ pointer: UnsafePointer<CChar>?) -> String? {
    guard let pointer else { return nil }
    return String(validatingCString: pointer)
}
