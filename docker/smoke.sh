#!/usr/bin/env bash
# Smoke test of the remat sidecar image, on a machine without an image registry:
#
#  1. starts a private dockerd by hand (no systemd) with no bridge, no iptables rules and no
#     IP forwarding/masquerading, so no network is created; containers get only
#     --network none / host / container:NAME;
#  2. makes a base image with debootstrap + `docker import` (or reuses $BASE_IMAGE, or a
#     rootfs given in $ROOTFS);
#  3. builds docker/Dockerfile.runtime around a host-built binary with the classic builder;
#  4. runs the sidecar with --network none, waits for HEALTHCHECK (`remat probe /healthz`)
#     to be healthy, checks it runs as uid 10001 and runs the manifests' exec probes;
#  5. POSTs /v1/solve from a second container sharing its network namespace
#     (--network container:remat-smoke: the pod pattern);
#  6. stops it (SIGTERM) and checks a clean exit (code 0, "stopped" logged);
#  7. stops the dockerd it started, by its pid.
#
# Environment: REMAT_BIN (default target/release/remat, built if missing), BASE_IMAGE
# (default local/bookworm-minbase), ROOTFS (an existing debootstrap tree), MIRROR
# (debootstrap mirror), WORK (scratch directory). Needs root, dockerd (Debian's docker.io),
# debootstrap unless the base image or ROOTFS exists.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${WORK:-$(mktemp -d /tmp/remat-smoke.XXXXXX)}"
BASE_IMAGE="${BASE_IMAGE:-local/bookworm-minbase}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
REMAT_BIN="${REMAT_BIN:-$ROOT/target/release/remat}"
IMAGE=remat:smoke
NAME=remat-smoke
export DOCKER_HOST="unix://$WORK/docker.sock"
DOCKERD_PID=""

say() { printf '[smoke %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

cleanup() {
  set +e
  if [ -n "$DOCKERD_PID" ]; then
    docker rm -f "$NAME" >/dev/null 2>&1
    say "stopping dockerd (pid $DOCKERD_PID)"
    kill -TERM "$DOCKERD_PID" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.1; done
    # Leftover namespace mounts under the exec root, if any.
    grep -o "$WORK/[^ ]*" /proc/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null
  fi
}
trap cleanup EXIT

command -v dockerd >/dev/null || { echo "dockerd not found (apt-get install docker.io)" >&2; exit 2; }
mkdir -p "$WORK"

say "starting dockerd in $WORK"
dockerd --data-root "$WORK/data" --exec-root "$WORK/exec" -H "$DOCKER_HOST" -p "$WORK/docker.pid" \
  --bridge=none --iptables=false --ip-forward=false --ip-masq=false >"$WORK/dockerd.log" 2>&1 &
DOCKERD_PID=$!
for _ in $(seq 1 100); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
docker info >/dev/null || { cat "$WORK/dockerd.log" >&2; exit 1; }
say "dockerd up (pid $DOCKERD_PID), server $(docker version --format '{{.Server.Version}}')"

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  if [ -z "${ROOTFS:-}" ]; then
    command -v debootstrap >/dev/null || { echo "debootstrap not found" >&2; exit 2; }
    ROOTFS="$WORK/rootfs"
    say "debootstrap bookworm minbase into $ROOTFS (several minutes)"
    debootstrap --variant=minbase --include=curl,ca-certificates,libstdc++6 bookworm "$ROOTFS" "$MIRROR" \
      >"$WORK/debootstrap.log" 2>&1
  fi
  say "importing $ROOTFS as $BASE_IMAGE"
  tar -C "$ROOTFS" -c . | docker import - "$BASE_IMAGE" >/dev/null
fi

if [ ! -x "$REMAT_BIN" ]; then
  say "building the release binary"
  (cd "$ROOT" && cargo build --release --locked --bin remat)
fi
mkdir -p "$WORK/ctx"
cp "$REMAT_BIN" "$WORK/ctx/remat"
cp "$ROOT/docker/Dockerfile.runtime" "$WORK/ctx/Dockerfile"
say "building $IMAGE from $BASE_IMAGE (classic builder)"
# The classic builder prints a deprecation notice on stderr; keep it out of the output.
DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$IMAGE" "$WORK/ctx" \
  2>"$WORK/build.log" || { cat "$WORK/build.log" >&2; exit 1; }

say "running the sidecar with --network none, as the manifests' securityContext does"
# No capabilities, no privilege escalation, a read-only root, Docker's default seccomp
# profile (the restricted Pod Security Standard of docker/k8s-sidecar.yaml).
docker run -d --name "$NAME" --network none --cap-drop ALL \
  --security-opt no-new-privileges --read-only "$IMAGE" >/dev/null
status=""
for _ in $(seq 1 60); do
  status="$(docker inspect -f '{{.State.Health.Status}}' "$NAME")"
  [ "$status" = healthy ] && break
  sleep 0.5
done
say "health: $status"
[ "$status" = healthy ] || { docker logs "$NAME" >&2; exit 1; }
uid="$(docker exec "$NAME" id -u)"
say "sidecar runs as uid $uid"
[ "$uid" = 10001 ]

# The Kubernetes manifests' exec probes, run as the kubelet would (inside the container):
# HEALTHCHECK above already ran `remat probe /healthz`; /readyz answers, a port nobody
# listens on fails with exit 1.
say "exec probes: remat probe /readyz, and a closed port"
docker exec "$NAME" /usr/local/bin/remat probe /readyz --timeout 1
probe_code=0
docker exec "$NAME" /usr/local/bin/remat probe /healthz --addr 127.0.0.1:9 --timeout 1 || probe_code=$?
say "probe of a closed port: exit $probe_code"
[ "$probe_code" = 1 ]

say "POST /v1/solve from a second container in the sidecar's network namespace"
reply="$(docker run --rm --network "container:$NAME" -v "$ROOT/graphs:/graphs:ro" --entrypoint /bin/sh "$IMAGE" -c \
  'printf "{\"graph\": %s, \"budget\": \"70%%\"}" "$(cat /graphs/linear-8.json)" \
   | curl -fsS -X POST -H "content-type: application/json" --data-binary @- http://127.0.0.1:8080/v1/solve')"
echo "$reply" | head -c 300; echo
echo "$reply" | grep -Eq '"status":"(optimal|feasible)"'

say "docker stop (SIGTERM)"
start=$(date +%s.%N)
docker stop -t 30 "$NAME" >/dev/null
code="$(docker inspect -f '{{.State.ExitCode}}' "$NAME")"
say "exit code $code after $(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo '?') s"
docker logs "$NAME" 2>&1 | tail -n 3
[ "$code" = 0 ]
docker logs "$NAME" 2>&1 | grep -q '"stopped"'
say "OK"
