#!/usr/bin/env bash
# Builds reverser's container images offline: the binaries with Bazel, then one image per service
# FROM scratch (the binary, its ldd closure, CA certificates, a nobody user), with podman in a
# private configuration and store (deploy/image/podman_env.sh), exported as OCI archives.
#
# Usage: deploy/image/build.sh [options] [image...]
#   --compilation_mode M  Bazel's compilation mode for the binaries: opt (default), fastbuild, dbg
#   --out DIR             where the OCI archives go (default deploy/image/out, gitignored):
#                         DIR/reverser-<name>-<version>.oci.tar (byte-for-byte reproducible),
#                         plus DIR/images.txt (reference, image ID, size in bytes)
#   --no-export           build into the private store only, write no archives
#   --docker-archives     also write DIR/reverser-<name>-<version>.docker.tar (docker-archive, the
#                         format of `docker save`, which every `kind load image-archive` takes)
#   --push REGISTRY       also copy each image to docker://REGISTRY/reverser-<name>:<version>
#   --dest-tls-verify B   passed to `skopeo copy` when pushing (true|false; default skopeo's: true)
#   --dest-creds U:P      passed to `skopeo copy` when pushing
#   --check-reproducible  build every image a second time from a fresh context without the layer
#                         cache and fail unless the image IDs are identical
#   --junit FILE          write one JUnit result per image (built; reproducible when checked)
#   image                 a subset of: catalog materializer splicer gitworker reverserctl redis
#                         (default: all)
# Images are tagged localhost/reverser-<name>:<version> (and reverserctl as localhost/reverserctl),
# the version read from libs/runtime/service_host.cc. The store lives in $REVERSER_IMAGE_STATE
# (default ~/.cache/reverser-image); `source deploy/image/podman_env.sh` to use it by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

mode=opt
out=$root/deploy/image/out
export_archives=1
docker_archives=
push=
tls_verify=
creds=
check_repro=
junit=
images=()
while [ $# -gt 0 ]; do
  case "$1" in
    --compilation_mode) mode=$2; shift 2 ;;
    --compilation_mode=*) mode=${1#*=}; shift ;;
    --out) out=$2; shift 2 ;;
    --no-export) export_archives=; shift ;;
    --docker-archives) docker_archives=1; shift ;;
    --push) push=$2; shift 2 ;;
    --dest-tls-verify) tls_verify=$2; shift 2 ;;
    --dest-tls-verify=*) tls_verify=${1#*=}; shift ;;
    --dest-creds) creds=$2; shift 2 ;;
    --check-reproducible) check_repro=1; shift ;;
    --junit) junit=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "build.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) images+=("$1"); shift ;;
  esac
done
case "$mode" in opt|fastbuild|dbg) ;; *) echo "build.sh: --compilation_mode must be opt, fastbuild or dbg" >&2; exit 2 ;; esac
all=(catalog materializer splicer gitworker reverserctl redis)
[ ${#images[@]} -eq 0 ] && images=("${all[@]}")
for i in "${images[@]}"; do
  case " ${all[*]} " in *" $i "*) ;; *) echo "build.sh: unknown image $i (one of: ${all[*]})" >&2; exit 2 ;; esac
done

for tool in podman skopeo ldd python3; do
  command -v $tool >/dev/null || { echo "build.sh: $tool is missing (bash tools/install-deps.sh)" >&2; exit 1; }
done
# shellcheck source=podman_env.sh
source "$root/deploy/image/podman_env.sh"
version=$(reverser_version "$root")

image_ref() {  # the local name of an image
  case "$1" in reverserctl) echo "localhost/reverserctl:$version" ;; *) echo "localhost/reverser-$1:$version" ;; esac
}
archive_name() { case "$1" in reverserctl) echo "reverserctl-$version.oci.tar" ;; *) echo "reverser-$1-$version.oci.tar" ;; esac; }

work=$(mktemp -d "${TMPDIR:-/tmp}/reverser-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- binaries ------------------------------------------------------------------------------
labels=()
for i in "${images[@]}"; do
  case "$i" in
    redis) ;;
    reverserctl) labels+=(//tools/reverserctl:reverserctl) ;;
    *) labels+=("//services/$i:$i") ;;
  esac
done
bin=
if [ ${#labels[@]} -gt 0 ]; then
  # Another mode than Bazel's default leaves the workspace's bazel-bin symlink alone (it keeps
  # pointing at the fastbuild outputs the tests and deploy/local use).
  symlinks=()
  [ "$mode" = fastbuild ] || symlinks=(--symlink_prefix=/)
  echo "build.sh: bazel build --compilation_mode=$mode ${labels[*]}" >&2
  bazel_rc=0
  bazel build --compilation_mode="$mode" "${symlinks[@]}" "${labels[@]}" >"$work/bazel.log" 2>&1 || bazel_rc=$?
  grep -E '^(ERROR|INFO: (Elapsed|Build completed))' "$work/bazel.log" | awk '!seen[$0]++' >&2 || true
  if [ $bazel_rc -ne 0 ]; then
    tail -30 "$work/bazel.log" >&2
    echo "build.sh: bazel build failed" >&2
    exit 1
  fi
  bin=$(bazel info --compilation_mode="$mode" bazel-bin 2>/dev/null)
fi
if printf '%s\n' "${images[@]}" | grep -qx redis; then
  for b in /usr/bin/redis-server /usr/bin/redis-cli; do
    [ -x "$b" ] || { echo "build.sh: $b is missing (apt-get install redis-server)" >&2; exit 1; }
  done
fi

# ---- one image -----------------------------------------------------------------------------
# The rootfs.py arguments and the Containerfile of an image, into context directory $2.
stage() {
  local name=$1 ctx=$2 entry user=65534:65534 workdir=/ rootfs=()
  mkdir -p "$ctx"
  case "$name" in
    catalog|materializer|splicer)
      rootfs=(--elf "$bin/services/$name/$name:/usr/local/bin/$name")
      entry="/usr/local/bin/$name" ;;
    gitworker)
      # The default --work_dir is /var/lib/reverser/gitworker: mount a volume at /var/lib/reverser
      # (the gitworker creates the 0700 folder inside it; it refuses a group/world-writable one).
      rootfs=(--elf "$bin/services/$name/$name:/usr/local/bin/$name" --dir "/var/lib/reverser:0700:65534:65534")
      entry="/usr/local/bin/$name" ;;
    reverserctl)
      rootfs=(--elf "$bin/tools/reverserctl/reverserctl:/usr/local/bin/reverserctl")
      entry=/usr/local/bin/reverserctl ;;
    redis)
      # Debian's redis-server is redis-check-rdb under another name (it picks its mode by argv[0]).
      rootfs=(--elf /usr/bin/redis-server:/usr/bin/redis-server --elf /usr/bin/redis-cli:/usr/bin/redis-cli
              --dir "/data:0700:65534:65534")
      entry=/usr/bin/redis-server; workdir=/data ;;
  esac
  python3 "$root/deploy/image/rootfs.py" --out "$ctx/rootfs.tar" "${rootfs[@]}"
  local title description
  case "$name" in
    reverserctl) title=reverserctl; description="reverser's admin CLI" ;;
    redis) title=reverser-redis; description="Debian's redis-server and redis-cli for reverser's embedded Redis" ;;
    *) title=reverser-$name; description="reverser $name service" ;;
  esac
  cat >"$ctx/Containerfile" <<EOF
FROM scratch
ADD rootfs.tar /
USER $user
WORKDIR $workdir
ENTRYPOINT ["$entry"]
LABEL org.opencontainers.image.title="$title" \\
      org.opencontainers.image.description="$description" \\
      org.opencontainers.image.version="$version"
EOF
}

build_in() {  # name, context, extra podman build flags...; prints the image ID
  local name=$1 ctx=$2; shift 2
  podman build -q --timestamp 0 --pull=never --network=none --format=oci "$@" \
    -t "$(image_ref "$name")" "$ctx" | tail -1
}

declare -A verdict why id_of
failed=0
for name in "${images[@]}"; do
  start=$(date +%s.%N)
  verdict[$name]=PASS why[$name]=
  if ! stage "$name" "$work/$name.1" >"$work/$name.log" 2>&1 ||
     ! id=$(build_in "$name" "$work/$name.1" 2>>"$work/$name.log"); then
    verdict[$name]=FAIL why[$name]="build failed: $(tail -3 "$work/$name.log" | tr '\n' ' ')"
    echo "build.sh: FAIL $name: ${why[$name]}" >&2
    failed=1
    continue
  fi
  id_of[$name]=$id
  if [ -n "$check_repro" ]; then
    # A second build from a fresh context (new staging folder, new tar) without the layer cache.
    if ! stage "$name" "$work/$name.2" >>"$work/$name.log" 2>&1 ||
       ! id2=$(build_in "$name" "$work/$name.2" --no-cache 2>>"$work/$name.log"); then
      verdict[$name]=FAIL why[$name]="second build failed: $(tail -3 "$work/$name.log" | tr '\n' ' ')"
    elif [ "$id2" != "$id" ]; then
      verdict[$name]=FAIL why[$name]="not reproducible: image ID ${id:0:12} then ${id2:0:12}"
    fi
    [ "${verdict[$name]}" = PASS ] || { echo "build.sh: FAIL $name: ${why[$name]}" >&2; failed=1; }
  fi
  size=$(podman image inspect --format '{{.Size}}' "$id")
  awk -v n="$name" -v r="$(image_ref "$name")" -v id="${id:0:12}" -v size="$size" -v start="$start" \
    -v now="$(date +%s.%N)" -v repro="${check_repro:+  (rebuilt: ${verdict[$name]/PASS/same ID})}" \
    'BEGIN { printf "build.sh: %-12s %-38s %s %6.1f MB %5.1f s%s\n", n, r, id, size / 1e6, now - start, repro }' >&2
done

# Earlier builds' images that lost their tag to these: only this private store is pruned.
podman image prune -f >/dev/null 2>&1 || true

# ---- export and push -----------------------------------------------------------------------
if [ -n "$export_archives" ] && [ $failed -eq 0 ]; then
  mkdir -p "$out"
  : >"$out/images.txt.new"
  for name in "${images[@]}"; do
    ref=$(image_ref "$name")
    file=$out/$(archive_name "$name")
    rm -f "$file"
    skopeo copy -q "containers-storage:$ref" "oci-archive:$file:$ref" ||
      { echo "build.sh: exporting $ref failed" >&2; failed=1; continue; }
    python3 "$root/deploy/image/normalize_tar.py" "$file"
    if [ -n "$docker_archives" ]; then
      dfile=${file%.oci.tar}.docker.tar
      rm -f "$dfile"
      skopeo copy -q "containers-storage:$ref" "docker-archive:$dfile:$ref" ||
        { echo "build.sh: exporting $ref as a docker archive failed" >&2; failed=1; continue; }
      python3 "$root/deploy/image/normalize_tar.py" "$dfile"
    fi
    printf '%s %s %s\n' "$ref" "${id_of[$name]}" "$(podman image inspect --format '{{.Size}}' "$ref")" >>"$out/images.txt.new"
  done
  mv -f "$out/images.txt.new" "$out/images.txt"
  echo "build.sh: OCI archives in $out" >&2
fi
if [ -n "$push" ] && [ $failed -eq 0 ]; then
  flags=()
  [ -n "$tls_verify" ] && flags+=("--dest-tls-verify=$tls_verify")
  [ -n "$creds" ] && flags+=("--dest-creds=$creds")
  for name in "${images[@]}"; do
    ref=$(image_ref "$name")
    dest=docker://${push%/}/${ref#localhost/}
    echo "build.sh: pushing $dest" >&2
    skopeo copy -q "${flags[@]}" "containers-storage:$ref" "$dest" || { echo "build.sh: push to $dest failed" >&2; failed=1; }
  done
fi

if [ -n "$junit" ]; then
  rows=()
  for name in "${images[@]}"; do rows+=("$name" "${verdict[$name]:-FAIL}" "${why[$name]:-not built}" "$work/$name.log"); done
  python3 "$root/tools/ci/junit.py" "$junit" image-build "${rows[@]}"
fi
exit $failed
