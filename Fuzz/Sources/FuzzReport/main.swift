import CFuzzerDriver
import Glibc
import RoamFuzzTargets

/// The target; libFuzzer calls it on each input it makes (scripts/fuzz.sh has the options used).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzTarget.report.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

// SwiftPM links this file's top-level code as main; whichever main the linker keeps, this one
// or libFuzzer's, runs libFuzzer's driver on the function above.
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })
