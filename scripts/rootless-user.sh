# Sourced by the rootless checks: `as_user COMMAND...` runs COMMAND as an unprivileged user with
# no capability, in a fresh work directory of its own ($work, removed on exit), with a minimal
# environment. As root the user is `nobody` (or ROAM_ROOTLESS_USER); otherwise the caller.
# AS_USER_DIRECTORY=DIR runs it in DIR instead (a package whose tests read files relative to it).
if [ "$(id -u)" = 0 ]; then
  user=${ROAM_ROOTLESS_USER:-nobody}
else
  user=$(id -un)
fi
uid=$(id -u "$user"); gid=$(id -g "$user")
work=$(mktemp -d /tmp/roam-rootless-XXXXXX)
chmod 755 "$work"
[ "$(id -u)" = 0 ] && chown "$uid:$gid" "$work"
trap 'rm -rf "$work"' EXIT
as_user() {
  if [ "$(id -u)" = 0 ]; then
    (cd "${AS_USER_DIRECTORY:-$work}" && setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all \
      env -i PATH="$PATH" HOME="$work" TMPDIR="$work" LANG=C.UTF-8 "$@")
  else
    (cd "${AS_USER_DIRECTORY:-$work}" && env -i PATH="$PATH" HOME="$work" TMPDIR="$work" LANG=C.UTF-8 "$@")
  fi
}
