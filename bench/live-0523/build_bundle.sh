#!/bin/bash
# Build the SGLang 0.5.23 variant of the bundle for `bench/servers.py sglang` on the GPU host without
# network (Python 3.12, torch 2.11.0+cu130, torchvision/pillow/numpy from the host's own install).
# Run from the project root, after the live-sglang recipe's build_bundle.sh (../shared/live-sglang,
# copied to .live/: it makes extra.tar.xz and downloads sglang-kernel 0.4.5):
#   bash bench/live-0523/build_bundle.sh
# Output: .live/carry/site523.tar.xz, a full
# site tree to unpack INSTEAD of site.tar.xz (extra.tar.xz from build_bundle.sh still goes over it:
# faker, hypothesis, regex, tqdm come from there, not from here).
#
# What it holds: SGLang 0.5.23 and the packages its tokenizer-manager request path imports
# (traced with bench/servers.py on every mode and workload, CPU), at tests/sglang/requirements-0.5.23.txt's
# pins (transformers 5.19.0, tokenizers 0.23.2, xgrammar 0.2.7, apache-tvm-ffi 0.1.15.post2, openai 2.8.0),
# plus a few small ones (jiter, lazy-importer, llguidance, ...), and sglang-kernel 0.4.5's sm90 ops:
# with a GPU visible SGLang imports sgl_kernel on that path (quantization/activation/sampler modules);
# 0.5.23 pins sglang-kernel 0.4.10, but that one is built for torch 2.14.1 (its common_ops needs
# symbols torch 2.11's libtorch lacks), while 0.4.5 (SGLang 0.5.16's, torch 2.11) has every name
# 0.5.23 imports from it there and loads on the host (H100/H200: sm90 only). Not here: flashinfer
# (with SGLANG_IS_FLASHINFER_AVAILABLE=false nothing on the path imports it), the project's own wheel
# (tokbackend and tokbackend.equivalence come from the tree: `.` first on PYTHONPATH, see sitecustomize.py), torch and its
# dependencies, numpy, torchvision, pillow (the host's own).
set -eu
HERE=$(dirname "$0"); L=.live; W=${WHEELS523:-/tmp/live-wheels523}; OUT=$L/carry; B=/tmp/sglbundle523; S=$B/site
mkdir -p $W $OUT
PLAT="--python-version 3.12 --implementation cp --only-binary=:all:"
# manylinux_2_31: llguidance 1.9.1's only x86-64 wheel
for p in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do PLAT="$PLAT --platform ${p}_x86_64"; done
# 1. wheels (~120 MB, stay outside .live); sglang-kernel 0.4.5 (383 MB) where build_bundle.sh keeps it
KW=${WHEELS:-/tmp/live-wheels}; mkdir -p $KW
python3 -m pip download -q --no-deps $PLAT -d $W -r $HERE/wheels.txt
python3 -m pip download -q --no-deps $PLAT -d $KW sglang-kernel==0.4.5
rm -rf $B; mkdir -p $S
# (xgrammar 0.2.7's wheel has no static library to drop, unlike 0.2.1's: step 3 strips its bindings)
python3 -m pip install -q --no-deps --no-compile --no-index --find-links $W --target $S $PLAT -r $HERE/wheels.txt
# sglang-kernel: sm90 common_ops and Python only, as build_bundle.sh keeps it
unzip -q -o $KW/sglang_kernel-0.4.5-*.whl -d $S -x 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/infllm_ops*' 'sgl_kernel/flashmla_ops.abi3.so'
# 2. what the bench never imports: console scripts, SGLang's diffusion stack, its Rust server/gRPC/
#    bench extensions and radix-tree core (the tokenizer manager loads none of them), its tests,
#    the JIT kernels' CUDA sources; apache-tvm-ffi's C++ sources and headers
#    (its lib/libtvm_ffi_testing.so stays: tvm_ffi/core.so links it)
rm -rf $S/bin $S/share $S/sglang/multimodal_gen $S/sglang/test \
  $S/sglang/srt/rust_extensions/*.so $S/sglang/srt/mem_cache/rust_tree_core/*.so \
  $S/tvm_ffi/3rdparty $S/tvm_ffi/src $S/tvm_ffi/include
find $S/sglang/kernels/jit -type f \( -name '*.cuh' -o -name '*.cu' -o -name '*.h' -o -name '*.cpp' -o -name '*.hip' \) -delete
# 3. strip debug info from the extension modules built with it (uvloop 16 -> 2 MB, tokenizers, ...);
#    vendored libraries under *.libs/ are left as auditwheel patched them
find $S -name '*.so' -not -path '*.libs/*' | while read f; do
  if file "$f" | grep -q 'not stripped'; then strip --strip-unneeded "$f"; fi
done
find $S -name '__pycache__' -prune -exec rm -rf {} +
tar -cf - -C $S . | xz -T2 -9 > $OUT/site523.tar.xz
du -sh $S; du -b $OUT/site523.tar.xz $OUT/extra.tar.xz
# On the host (carry .live/carry/site523.tar.xz and .live/carry/extra.tar.xz):
#   rm -rf /tmp/site && mkdir -p /tmp/site && tar -xJf .live/carry/site523.tar.xz -C /tmp/site \
#     && tar -xJf .live/carry/extra.tar.xz -C /tmp/site
#   PYTHONPATH=.:/tmp/site SGLANG_IS_FLASHINFER_AVAILABLE=false HF_HUB_OFFLINE=1 \
#     python3 bench/servers.py sglang   # writes bench/servers-sglang.json
