# Sourced by deploy/image/build.sh and smoke_test.sh: a private podman configuration and image
# store, so nothing under /etc is read or changed and the host's own podman images stay apart.
#
#   REVERSER_IMAGE_STATE  where the configuration and the store live (default
#                         ${XDG_CACHE_HOME:-$HOME/.cache}/reverser-image); created on first use.
#
# Two settings are needed on VMs like the CI machines (deploy/image/README.md): runc instead of
# crun (crun refuses a hybrid cgroup layout) and rlimits within the VM's hard limits (podman as
# root asks for nofile 1048576 by default, which setrlimit refuses).

reverser_image_state=${REVERSER_IMAGE_STATE:-${XDG_CACHE_HOME:-$HOME/.cache}/reverser-image}
mkdir -p "$reverser_image_state/storage" "$reverser_image_state/run" "$reverser_image_state/tmp"
chmod 700 "$reverser_image_state"

cat >"$reverser_image_state/containers.conf.new" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
EOF
echo "image_copy_tmp_dir = \"$reverser_image_state/tmp\"" >>"$reverser_image_state/containers.conf.new"
mv -f "$reverser_image_state/containers.conf.new" "$reverser_image_state/containers.conf"
cat >"$reverser_image_state/storage.conf.new" <<EOF
[storage]
driver = "overlay"
runroot = "$reverser_image_state/run"
graphroot = "$reverser_image_state/storage"
EOF
mv -f "$reverser_image_state/storage.conf.new" "$reverser_image_state/storage.conf"
# No registry is searched for short names: every image here is localhost/... or FROM scratch.
cat >"$reverser_image_state/registries.conf.new" <<'EOF'
unqualified-search-registries = []
short-name-mode = "enforcing"
EOF
mv -f "$reverser_image_state/registries.conf.new" "$reverser_image_state/registries.conf"

export CONTAINERS_CONF="$reverser_image_state/containers.conf"
export CONTAINERS_STORAGE_CONF="$reverser_image_state/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$reverser_image_state/registries.conf"

# The project version, from the one place it is defined (the services' build info and
# `reverserctl status` report it): libs/runtime/service_host.cc's Version().
reverser_version() {
  local v
  v=$(sed -n 's/^const char\* Version() { return "\([^"]*\)"; }.*/\1/p' "$1/libs/runtime/service_host.cc")
  [ -n "$v" ] || { echo "cannot read Version() from $1/libs/runtime/service_host.cc" >&2; return 1; }
  echo "$v"
}
