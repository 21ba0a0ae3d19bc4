import CFuzzerDriver
import Glibc
import RoamFuzzTargets

// One libFuzzer binary for every target, chosen by ROAM_FUZZ_TARGET (scenario, trace,
// interfaces, json, report); scripts/fuzz.sh sets it and the options used.
let name = getenv("ROAM_FUZZ_TARGET").map { String(cString: $0) } ?? ""
guard let chosen = FuzzTarget(rawValue: name) else {
    let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
    let message = Array("RoamFuzz: set ROAM_FUZZ_TARGET to one of \(names)\n".utf8)
    _ = message.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    exit(2)
}
let target = chosen

/// libFuzzer calls this on each input it makes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    target.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

// SwiftPM links this file's top-level code as main; whichever main the linker keeps, this one
// or libFuzzer's, runs libFuzzer's driver on the function above.
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })
