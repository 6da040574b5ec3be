#!/usr/bin/env bash
# tests/gpu/bundle.sh BIN OUTDIR - copies gpu_check and the shared libraries
# it loads (libdist and what libdist links: SQLite, libdw, curl, ...) into
# OUTDIR, so the device machine needs only glibc, libstdc++, the driver, the
# CUDA runtime and NCCL (run.sh finds those there). The build runs it after
# linking gpu_check; OUTDIR (build/gpu, about 10 MB) is what to carry.
set -eu
bin=$1 out=$2
mkdir -p "$out"
cp -f "$bin" "$out/"
ldd "$bin" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|\
    libstdc++.so*|libcudart.so*|libcuda.so*|libnccl.so*|libresolv.so*) ;;
    *) cp -fL "$lib" "$out/" ;;
  esac
done
