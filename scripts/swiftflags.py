"""The compiler flags that reach Roam's built modules from outside SwiftPM (the C modules'
maps and headers, libnl's include path), shared by check-samples.py and api-check.py."""
import glob, os, subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module_flags(build):
    """`-I` for the built Swift modules of `build` (a --show-bin-path), and `-Xcc` flags for
    every C module they import."""
    result = ["-I", os.path.join(build, "Modules")]
    try:
        result += [f for flag in subprocess.check_output(["pkg-config", "--cflags", "libnl-route-3.0"], text=True).split() for f in ("-Xcc", flag)]
    except (OSError, subprocess.CalledProcessError):
        pass
    maps = glob.glob(os.path.join(ROOT, "Sources/C*/module.modulemap")) + glob.glob(os.path.join(build, "*.build/module.modulemap")) \
        + glob.glob(os.path.join(ROOT, ".build/checkouts/*/Sources/*/include/module.modulemap"))
    for modulemap in maps:
        result += ["-Xcc", "-fmodule-map-file=" + modulemap]
    for include in glob.glob(os.path.join(ROOT, "Sources/C*/include")) + glob.glob(os.path.join(ROOT, ".build/checkouts/*/Sources/*/include")):
        result += ["-Xcc", "-I" + include]
    return result
