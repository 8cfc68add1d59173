"""The tensor IR's ``dot4_u8s8`` on the CPU: a scalar function LLVM's loop vectorizer
widens into ``vpdpbusd``.

``dot4_u8s8(acc, a, b)`` adds to ``acc`` the four products of ``a``'s bytes read
unsigned and ``b``'s read signed (:mod:`hetero.core.ir.tir.registry`): one lane of
x86's ``vpdpbusd``. The tensor IR stays scalar, so the renderer calls a scalar
function ``hetero.dot4_u8s8`` whose body is that arithmetic, and where the host has
AVX-512 VNNI gives it LLVM's ``vector-function-abi-variant`` attribute naming a 4-,
8- and 16-lane version, each one ``llvm.x86.avx512.vpdpbusd``: vectorizing a loop
around the call, LLVM calls the version of its width (a lane loop of 16 int32 sums
becomes one ``vpdpbusd zmm`` per step). The vector versions are ``alwaysinline``,
and :func:`~hetero.plugins.llvm_cpu.target.optimise_text` runs LLVM's always-inliner
after the O3 pipeline (whose inliner ran before the vectorizer made the calls), so
the instruction lands in the loop. The scalar function is ``noinline`` there, or
the inliner would expand it into byte arithmetic before the vectorizer saw the call;
a loop's scalar remainder calls it. Without VNNI it is plain arithmetic, inlined and
vectorized like any other (the default schedules use the intrinsic only with VNNI:
:mod:`~hetero.plugins.llvm_cpu.schedules_int8`).

The renderer names the vector versions only for the host, and only where it has
VNNI: a module built ahead of time for another CPU (``emit_object``) gets the plain
arithmetic, which every x86 and Arm CPU runs.
"""

from __future__ import annotations

from llvmlite import ir

I8 = ir.IntType(8)
I32 = ir.IntType(32)
#: The scalar function's symbol; a vector version appends ``.v{lanes}``.
SCALAR = "hetero.dot4_u8s8"
#: Lanes of the vector versions: xmm, ymm and zmm ``vpdpbusd``.
LANES = (4, 8, 16)


def has_vnni(features: dict[str, bool]) -> bool:
    """Whether a CPU with LLVM's ``features`` runs the vector versions."""
    return bool(features.get("avx512vnni") and features.get("avx512vl") and features.get("avx512bw"))


def host_vnni() -> bool:
    """Whether this process's CPU runs the vector versions."""
    # Imported here: the target module imports the codegen, which imports this one.
    from hetero.plugins.llvm_cpu.target import host_features
    return has_vnni(host_features())


def dot4_function(module: ir.Module, vnni: bool) -> ir.Function:
    """``module``'s scalar ``hetero.dot4_u8s8``, defined on first use; with ``vnni`` it
    names its ``vpdpbusd`` versions for the loop vectorizer."""
    existing = module.globals.get(SCALAR)
    if isinstance(existing, ir.Function):
        return existing
    fn = ir.Function(module, ir.FunctionType(I32, [I32, I32, I32]), name=SCALAR)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("readnone")
    acc, a, b = fn.args
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    total = acc
    for k in range(4):
        unsigned = bld.and_(bld.lshr(a, ir.Constant(I32, 8 * k)), ir.Constant(I32, 0xFF))
        up = bld.shl(b, ir.Constant(I32, 24 - 8 * k)) if k < 3 else b
        total = bld.add(total, bld.mul(unsigned, bld.ashr(up, ir.Constant(I32, 24))))
    bld.ret(total)
    if vnni:
        fn.attributes.add("noinline")
        variants = [_vector_version(module, lanes) for lanes in LANES]
        mappings = ",".join(f"_ZGV_LLVM_N{n}vvv_{SCALAR}({v.name})" for n, v in zip(LANES, variants))
        _string_attribute(fn.attributes, "vector-function-abi-variant", mappings)
        _keep(module, variants)
    return fn


def _vector_version(module: ir.Module, lanes: int) -> ir.Function:
    """``hetero.dot4_u8s8.v{lanes}``: ``vpdpbusd`` on ``lanes`` int32 sums."""
    words, bytes_ = ir.VectorType(I32, lanes), ir.VectorType(I8, 4 * lanes)
    intrinsic = ir.Function(module, ir.FunctionType(words, [words, bytes_, bytes_]),
                            name=f"llvm.x86.avx512.vpdpbusd.{32 * lanes}")
    fn = ir.Function(module, ir.FunctionType(words, [words, words, words]), name=f"{SCALAR}.v{lanes}")
    fn.linkage = "internal"
    for attribute in ("nounwind", "readnone", "alwaysinline"):
        fn.attributes.add(attribute)
    acc, a, b = fn.args
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    bld.ret(bld.call(intrinsic, [acc, bld.bitcast(a, bytes_), bld.bitcast(b, bytes_)]))
    return fn


def _string_attribute(attributes: ir.FunctionAttributes, key: str, value: str) -> None:
    # llvmlite knows only LLVM's keyword attributes; a string one is written as it is.
    set.add(attributes, f'"{key}"="{value}"')


def _keep(module: ir.Module, functions: list[ir.Function]) -> None:
    """Keep ``functions`` until code generation although nothing calls them yet (the
    vectorizer's calls come later): LLVM's ``llvm.compiler.used``."""
    ptr = ir.PointerType()
    used = ir.GlobalVariable(module, ir.ArrayType(ptr, len(functions)), "llvm.compiler.used")
    used.linkage = "appending"
    used.section = "llvm.metadata"
    used.initializer = ir.Constant(ir.ArrayType(ptr, len(functions)), functions)
