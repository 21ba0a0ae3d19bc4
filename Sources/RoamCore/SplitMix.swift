/// One step of SplitMix64 (Steele, Lea and Flood, 2014): the seed mixer behind Roam's seeded
/// random streams (a link's xoshiro256** state, a phone's movement and shadowing), the same on
/// every machine.
package func splitMix64(_ state: inout UInt64) -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var value = state
    value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
    value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
    return value ^ (value >> 31)
}
