#!/usr/bin/env python3
"""The device bundle's manifest.json (docs/FORMATS.md "Device bundle manifest"), for scripts/device-bundle.sh.

Usage: python3 scripts/lib/bundle_manifest.py write BUNDLE BUILD SOURCE DROPPED --nvcc NVCC --cudart CUDART

write lists every file and link of the staged bundle with its SHA-256 and mode, with the build's
type and compilers, the Debian package versions of what it bundles, the paths compiled into the
test binary and the libraries left to the device. Unreadable input exits 2.
"""
import hashlib
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from subcommands import Registry, read_text  # noqa: E402

manifest = Registry("bundle_manifest.py", __doc__.split("\n")[0])
command = manifest.command

# The vector extensions -march=native may use, recorded so that `launch` can warn where the device's
# processor lacks one.
NATIVE_FLAG_PREFIXES = ("avx", "amx", "fma", "bmi", "sse4", "f16c")


def output_of(*cmd):
    """The stripped standard output of a command, or None where it fails or is missing."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def cache_value(build, key):
    """The value of key in the build's CMakeCache.txt (None where it is not set)."""
    for line in read_text(f"{build}/CMakeCache.txt").splitlines():
        if line.startswith(key + ":"):
            return line.split("=", 1)[1].strip()
    return None


def package_version(name):
    """The installed Debian package's version (None where it is not installed)."""
    return output_of("dpkg-query", "-W", "-f=${Version}", name)


def cpu_flags():
    """This processor's flags, from /proc/cpuinfo's first "flags" line."""
    return read_text("/proc/cpuinfo").split("flags\t\t: ", 1)[1].split("\n", 1)[0].split()


def file_list(bundle):
    """Every file and link under bundle but manifest.json, sorted by path: path, bytes, sha256 and
    mode ("755" when executable, else "644") for a file; path and link (its target) for a link."""
    files = []
    for root, dirs, names in os.walk(bundle):
        dirs.sort()
        for n in sorted(names):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, bundle)
            if rel == "manifest.json":
                continue
            if os.path.islink(p):
                files.append({"path": rel, "link": os.readlink(p)})
                continue
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            files.append({"path": rel, "bytes": os.path.getsize(p), "sha256": h.hexdigest(),
                          "mode": "755" if os.access(p, os.X_OK) else "644"})
    return files


@command(("bundle", str), ("build", str), ("source", str), ("dropped", str), ("--nvcc", str), ("--cudart", str))
def write(bundle, build, source, dropped, nvcc, cudart):
    """Writes BUNDLE/manifest.json for the staged bundle packed from build (its CMakeCache.txt) and
    the source tree source (git describe): dropped is the Open MPI components left out (space
    separated), nvcc the CUDA compiler, cudart the bundled CUDA runtime's file."""
    files = file_list(bundle)
    m = {
        "format": "shardtrain-gpu-bundle", "format_version": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "code_version": output_of("git", "-C", source, "describe", "--always", "--dirty", "--tags"),
        "build": {"type": cache_value(build, "CMAKE_BUILD_TYPE"), "cuda_architectures": "90",
                  "native": cache_value(build, "SHARDTRAIN_NATIVE"),
                  "nvcc": (output_of(nvcc, "--version") or "").splitlines()[-1:],
                  "cxx": output_of("c++", "--version").splitlines()[0],
                  "build_os": platform.freedesktop_os_release().get("PRETTY_NAME"), "glibc": platform.libc_ver()[1],
                  "cpu_flags_used_by_native": sorted(f for f in cpu_flags() if f.startswith(NATIVE_FLAG_PREFIXES))},
        # Where the test binary looks for its data and tools (compiled-in paths); gpu-check's build stage links them.
        "compiled_paths": {"testdata": os.path.join(source, "testdata"), "bin": os.path.join(build, "bin"),
                           "source": source},
        "versions": {"openmpi": package_version("openmpi-bin"), "pmix": package_version("libpmix2"),
                     "hdf5": package_version("libhdf5-dev"), "onednn": package_version("libdnnl-dev"),
                     "cuda_runtime_bundled": os.path.basename(cudart)},
        "provided_by_device": read_text(f"{bundle}/lib/device-libs.txt").split(),
        "openmpi_components_left_out": dropped.split(),
        "files": files,
    }
    with open(f"{bundle}/manifest.json", "w") as f:
        json.dump(m, f, indent=1)
    print(f"device-bundle.sh: manifest: {len(files)} files, {sum(f.get('bytes', 0) for f in files)} bytes", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(manifest.main(sys.argv[1:]))
