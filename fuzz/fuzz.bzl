"""reverser_fuzzer: one libFuzzer target that is also a corpus-replay test."""

def reverser_fuzzer(name, srcs, deps = [], **kwargs):
    """Defines `name` as a cc_test over LLVMFuzzerTestOneInput in `srcs`.

    With --config=fuzz (clang-14, see .bazelrc and tools/fuzz.sh) libFuzzer supplies main() and
    the binary fuzzes. In the normal gcc build replay_main.cc supplies it and the test runs every
    file of fuzz/corpus/<name>/ through the target once: a cheap regression test of the seeds
    and of every reproducer added there.
    """
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = deps + select({
            "//fuzz:libfuzzer": [],
            "//conditions:default": ["//fuzz:replay_main"],
        }),
        linkopts = select({
            "//fuzz:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        linkstatic = True,
        data = native.glob(["corpus/" + name + "/**"]),
        args = ["fuzz/corpus/" + name],
        tags = ["fuzzer"],
        **kwargs
    )
