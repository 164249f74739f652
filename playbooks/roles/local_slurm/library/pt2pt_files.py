#!/usr/bin/python
"""Ansible module: write several small files (rendered on the controller) in one module run.

Why not ``template`` in a loop: each template item is two module runs (stat, then copy or
file), about 1 s per file on a slow 2-core machine, and a local cluster's configuration is six
files rendered on every ``up``, even when nothing changed. Here the controller renders each
file with the ``template`` lookup and this module compares, then replaces only what differs
(atomically: a temporary file in the same directory, then rename), in one run.
"""

from __future__ import annotations

import os
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: pt2pt_files
short_description: Write several files' contents and modes in one run; changed only when they differ
options:
  files:
    description: The files, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path of the file (its directory must exist).
        type: path
        required: true
      content:
        description: The whole content (e.g. a lookup of a template).
        type: str
        required: true
      mode:
        description: Octal permission bits, e.g. "0644".
        type: str
        required: true
"""


def _differs(path: str, data: bytes, mode: int) -> bool:
    try:
        with open(path, "rb") as fh:
            if fh.read() != data:
                return True
            st = os.fstat(fh.fileno())
    except OSError:
        return True
    return stat.S_IMODE(st.st_mode) != mode or (st.st_uid, st.st_gid) != (os.getuid(), os.getgid())


def _write(path: str, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".pt2pt-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main() -> None:
    module = AnsibleModule(
        argument_spec={"files": {"type": "list", "elements": "dict", "required": True, "options": {
            "path": {"type": "path", "required": True},
            "content": {"type": "str", "required": True},
            "mode": {"type": "str", "required": True},
        }}},
        supports_check_mode=True,
    )
    changed = []
    for item in module.params["files"]:
        try:
            mode = int(item["mode"], 8)
        except ValueError:
            module.fail_json(msg=f"{item['path']}: mode {item['mode']!r} is not octal, e.g. '0644'")
        data = item["content"].encode("utf-8")
        if not _differs(item["path"], data, mode):
            continue
        changed.append(item["path"])
        if not module.check_mode:
            try:
                _write(item["path"], data, mode)
            except OSError as exc:
                module.fail_json(msg=f"cannot write {item['path']}: {exc}", written=changed[:-1])
    module.exit_json(changed=bool(changed), written=changed)


if __name__ == "__main__":
    main()
