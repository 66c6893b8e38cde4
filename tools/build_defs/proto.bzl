"""Protobuf/gRPC C++ code generation with Debian's protoc and grpc_cpp_plugin (no rules_proto)."""

def sys_cc_proto_library(name, srcs, grpc = False, proto_deps = [], deps = [], visibility = None):
    """Generates .pb.{h,cc} (and .grpc.pb.{h,cc} when grpc) for srcs and wraps them in a cc_library.

    Imports are workspace-relative (`import "proto/reverser/v1/types.proto";`); well-known types
    resolve from /usr/include. Every imported .proto must be listed in srcs or proto_deps.
    """
    pkg = native.package_name()
    outs = []
    for s in srcs:
        base = s[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    grpc_flags = "--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin " if grpc else ""
    paths = " ".join([(pkg + "/" if pkg else "") + s for s in srcs])
    native.genrule(
        name = name + "_gen",
        srcs = srcs + proto_deps,
        outs = outs,
        cmd = "/usr/bin/protoc -I. --cpp_out=$(GENDIR) " + grpc_flags + paths,
        message = "protoc " + paths,
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + (["//third_party:grpcpp"] if grpc else ["//third_party:protobuf"]),
        visibility = visibility,
    )
