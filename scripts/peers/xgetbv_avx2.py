#!/usr/bin/env python3
"""A copy of ONNX Runtime and numpy whose XGETBV instructions are marked for scripts/peers/xgetbv_avx2.c.

Usage: scripts/peers/xgetbv_avx2.py VENV_PYTHON OUT_DIR   (prints OUT_DIR on its last line: put it first on
PYTHONPATH and preload xgetbv_avx2.so, and those packages see an XCR0 without AVX-512 state)

For machines without CPUID faulting (AMD, KVM guests on AMD), where scripts/peers/cpuid_avx2.c cannot hold ONNX
Runtime to its AVX2 kernels. The packages `onnxruntime` and `numpy` (and their bundled `*.libs` folders) are copied
from the venv; in every shared library of the copy each XGETBV instruction — found by disassembly with objdump, so
only real instruction starts — has its middle byte changed (0F 01 D0 -> 0F 0B D0, UD2 and a marker byte), which the
preload library answers with XCR0's AVX-512 and AMX bits clear. The venv itself is not touched. The copy is made once
per set of source files (OUT_DIR/xgetbv-sites.json records the sources' sizes and times and every site marked).

Checked on a Zen 4 (2026-12-03; 80 sites in 6 libraries): of perf's samples in ONNX Runtime during MiniLM fp32 at
batch 32, 64 % fell on instructions using zmm registers from the venv and none from the copy (71 % on ymm); its int8
at batch 32 went from 593–793 to 367–438 sentences/s (VNNI to AVX2 kernels), and numpy's CPU features lost AVX512*.
"""
import json, os, re, shutil, subprocess, sys

PACKAGES = ["onnxruntime", "numpy"]
XGETBV = bytes([0x0F, 0x01, 0xD0])
MARKED = bytes([0x0F, 0x0B, 0xD0])


def package_dirs(python):
    """The venv's folders of PACKAGES and of their bundled libraries (numpy.libs, onnxruntime.libs)."""
    code = ("import importlib.util, json, os\n"
            "dirs = []\n"
            "for name in %r:\n"
            "    spec = importlib.util.find_spec(name)\n"
            "    root = os.path.dirname(spec.origin)\n"
            "    dirs.append(root)\n"
            "    if os.path.isdir(root + '.libs'): dirs.append(root + '.libs')\n"
            "print(json.dumps(dirs))\n" % PACKAGES)
    return json.loads(subprocess.check_output([python, "-c", code], text=True))


def fingerprint(dirs):
    """Sizes and modification times of every file under dirs, so a changed venv makes a new copy."""
    entries = []
    for root in dirs:
        for folder, _, files in os.walk(root):
            for name in sorted(files):
                path = os.path.join(folder, name)
                info = os.lstat(path)
                entries.append([os.path.relpath(path, os.path.dirname(root)), info.st_size, int(info.st_mtime)])
    return sorted(entries)


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def load_segments(path):
    """(virtual address, file offset, size in file) of each PT_LOAD segment, from readelf."""
    out = subprocess.check_output(["readelf", "-lW", path], text=True)
    segments = []
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] == "LOAD":
            segments.append((int(fields[2], 16), int(fields[1], 16), int(fields[4], 16)))
    return segments


def xgetbv_addresses(path):
    """Virtual addresses of the XGETBV instructions objdump finds in path's code."""
    proc = subprocess.Popen(["objdump", "-d", "--no-show-raw-insn", path], stdout=subprocess.PIPE, text=True)
    pattern = re.compile(r"^\s*([0-9a-f]+):\s+xgetbv\s*$")
    addresses = [int(m.group(1), 16) for m in map(pattern.match, proc.stdout) if m]
    if proc.wait() != 0:
        raise SystemExit("xgetbv_avx2: objdump failed on %s" % path)
    return addresses


def mark(path):
    """Marks every XGETBV in the ELF file at path; returns the file offsets marked."""
    segments = load_segments(path)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        offsets = []
        for address in xgetbv_addresses(path):
            found = [off + address - vaddr for vaddr, off, size in segments if vaddr <= address < vaddr + size]
            if not found:
                raise SystemExit("xgetbv_avx2: %s: XGETBV at 0x%x lies in no loaded segment" % (path, address))
            offset = found[0]
            if data[offset:offset + 3] != XGETBV:
                raise SystemExit("xgetbv_avx2: %s: bytes at file offset 0x%x are %s, expected XGETBV (0f 01 d0)"
                                 % (path, offset, data[offset:offset + 3].hex(" ")))
            data[offset:offset + 3] = MARKED
            offsets.append(offset)
        f.seek(0)
        f.write(data)
    return offsets


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.strip().splitlines()[2])
    python, out = sys.argv[1], sys.argv[2]
    sources = package_dirs(python)
    manifest_path = os.path.join(out, "xgetbv-sites.json")
    wanted = fingerprint(sources)
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            if json.load(f).get("sources") == wanted:
                print(out)
                return
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    sites = {}
    for source in sources:
        target = os.path.join(out, os.path.basename(source))
        shutil.copytree(source, target, symlinks=True)
        for folder, _, files in os.walk(target):
            for name in files:
                path = os.path.join(folder, name)
                if ".so" in name and not os.path.islink(path) and is_elf(path):
                    offsets = mark(path)
                    if offsets:
                        sites[os.path.relpath(path, out)] = offsets
    if not any(name.startswith("onnxruntime") for name in sites):
        raise SystemExit("xgetbv_avx2: no XGETBV found in ONNX Runtime's libraries; it would not be held to AVX2")
    with open(manifest_path, "w") as f:
        json.dump({"sources": wanted, "sites": sites}, f)
    print("xgetbv_avx2: marked %d XGETBV sites in %d libraries under %s"
          % (sum(map(len, sites.values())), len(sites), out), file=sys.stderr)
    print(out)


if __name__ == "__main__":
    main()
