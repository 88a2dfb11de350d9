import Foundation
import LocalServers

/// A program run the way a container runtime or systemd runs a service, without either: in its own mount
/// namespace, chrooted into a root of its own (the host's /usr and /opt read-only, an /etc holding only the given
/// users and host names, empty /run, /tmp and /var), as a given uid with no supplementary groups and no
/// capabilities, seeing only the files mounted into it, with the owners and modes they have on the host (as docker
/// compose and systemd's credentials show them).
public struct ContainedProgram: Sendable {
    public struct Mount: Sendable {
        public var source: String
        public var target: String
        public var readOnly: Bool
        public init(_ source: String, at target: String, readOnly: Bool = true) {
            self.source = source
            self.target = target
            self.readOnly = readOnly
        }
    }

    public var uid: Int
    public var arguments: [String]
    public var environment: [String: String]
    public var mounts: [Mount]
    /// Directories made inside the root and owned by `uid` (what an image ships, such as a socket directory).
    public var ownedDirectories: [String]

    public init(uid: Int, arguments: [String], environment: [String: String] = [:], mounts: [Mount] = [], ownedDirectories: [String] = []) {
        self.uid = uid
        self.arguments = arguments
        self.environment = environment
        self.mounts = mounts
        self.ownedDirectories = ownedDirectories
    }

    /// The specification `runContainedShellFunction` reads: one item per line.
    public func specification(root: String) throws -> String {
        var lines = ["root \(root)", "uid \(uid)"]
        for mount in mounts {
            guard !(mount.source + mount.target).contains(where: \.isWhitespace) else {
                throw LocalServerError("a mounted path has white space: \(mount.source) \(mount.target)")
            }
            lines.append("mount \(mount.readOnly ? "ro" : "rw") \(mount.source) \(mount.target)")
        }
        lines += ownedDirectories.map { "dir \($0)" }
        lines += environment.sorted { $0.key < $1.key }.map { "env \($0.key)=\($0.value)" }
        lines += arguments.map { "arg \($0)" }
        guard !lines.contains(where: { $0.contains("\n") }) else { throw LocalServerError("a contained program's setting has a line break") }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Bash functions for a script run as root in its own network namespace: `contained SPEC` becomes (execs) the
/// program that SPEC (a `ContainedProgram.specification`) describes: call it as `(contained SPEC)` to wait for it,
/// or as `contained SPEC &`, and `$!` is the program's process id.
public let containedShellFunctions = #"""
contained() {
  exec unshare --mount --propagation private -- bash -c "$(declare -f contained_main); contained_main \"\$1\"" contained "$1"
}
contained_main() {
  set -euo pipefail
  local spec=$1 root='' uid='' line mode source target
  local -a arguments=() environment=() directories=()
  while IFS= read -r line; do
    case ${line%% *} in
      root) root=${line#root } ;;
      uid) uid=${line#uid } ;;
      env) environment+=("${line#env }") ;;
      arg) arguments+=("${line#arg }") ;;
      dir) directories+=("${line#dir }") ;;
    esac
  done < "$spec"
  mkdir -p "$root"
  mount -t tmpfs -o mode=755 contained-root "$root"
  for d in /usr /opt /bin /sbin /lib /lib32 /lib64 /libx32; do
    [ -e "$d" ] || continue
    if [ -L "$d" ]; then
      ln -s "$(readlink "$d")" "$root$d"
    else
      mkdir "$root$d"
      mount --rbind "$d" "$root$d"
      mount -o remount,bind,ro "$root$d"
    fi
  done
  mkdir -p "$root"/{etc,proc,dev,run,tmp,var/tmp}
  chmod 1777 "$root/tmp" "$root/var/tmp"
  mount --rbind /proc "$root/proc"
  mount --rbind /dev "$root/dev"
  for f in ld.so.cache ld.so.conf nsswitch.conf localtime services protocols; do
    [ -e "/etc/$f" ] && cp -L "/etc/$f" "$root/etc/"
  done
  [ -d /etc/ld.so.conf.d ] && cp -a /etc/ld.so.conf.d "$root/etc/"
  [ -d /etc/ssl ] && cp -a /etc/ssl "$root/etc/"
  while IFS= read -r line; do
    [ "${line%% *}" = mount ] || continue
    read -r _ mode source target <<< "$line"
    if [ -d "$source" ]; then
      mkdir -p "$root$target"
    else
      mkdir -p "$(dirname "$root$target")"
      touch "$root$target"
    fi
    mount --bind "$source" "$root$target"
    [ "$mode" = ro ] && mount -o remount,bind,ro "$root$target"
  done < "$spec"
  for d in "${directories[@]}"; do
    mkdir -p "$root$d"
    chown "$uid:$uid" "$root$d"
  done
  exec chroot "$root" setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all --bounding-set=-all \
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp "${environment[@]}" "${arguments[@]}"
}
"""#

/// Whether this machine can run `containedShellFunctions`: root, and namespaces allowed.
public let canRunContainedPrograms: Bool = {
    guard getuid() == 0, let unshare = findExecutable("unshare"), findExecutable("setpriv") != nil,
          findExecutable("chroot", extraDirectories: ["/usr/sbin"]) != nil, findExecutable("ip", extraDirectories: ["/usr/sbin", "/sbin"]) != nil
    else { return false }
    guard let process = try? ChildProcess(unshare, ["--net", "--mount", "--fork", "true"]) else { return false }
    let deadline = ContinuousClock.now + .seconds(10)
    while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
    return process.exitCode == 0
}()

/// The /etc/passwd and /etc/group of a contained program: root and the given users (name → uid, the group alike).
public func containedUserFiles(_ users: [String: Int], in directory: String) throws -> (passwd: String, group: String) {
    let all = [("root", 0)] + users.sorted { $0.value < $1.value }.map { ($0.key, $0.value) }
    let passwd = directory + "/passwd", group = directory + "/group"
    try all.map { "\($0.0):x:\($0.1):\($0.1)::/tmp:/usr/sbin/nologin\n" }.joined().write(toFile: passwd, atomically: true, encoding: .utf8)
    try all.map { "\($0.0):x:\($0.1):\n" }.joined().write(toFile: group, atomically: true, encoding: .utf8)
    for file in [passwd, group] { try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file) }
    return (passwd, group)
}
