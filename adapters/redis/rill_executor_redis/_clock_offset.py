"""A test view of a Redis store whose scripts read the server's ``TIME`` some time later
(or a clock that stands still).

``RedisStore._with_clock_offset`` (the hook of ``rill_executor.testing.with_clock_offset``)
answers a ``ShiftedRedisStore``: the same client and records, every script sent in a
variant of its own (``shifted_script``) whose ``clock()`` adds the offset, passed as one
more ``ARGV`` and taken off before the operation reads its arguments. Still one
``EVALSHA`` an operation; the store's own scripts are untouched, so an offset costs the
store nothing. The few calls that are not scripts of an operation (a purge's batches, a
scan's ``TIME``) are rewritten the same way on their way out.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

from rill_executor.store import drive

from . import _flows
from ._errors import REDIS_ERRORS, translate
from ._scripts import Op, Script, script, source
from ._store import RedisStore
from ._wire import command

__all__ = ["ShiftedRedisStore", "shifted_script"]

_CLOCK = """local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end"""
# The view's clock, the last ARGV: '<µs>' later than TIME, or '=<µs>' standing there.
_SHIFTED = """local CLOCK_SHIFT = table.remove(ARGV)
local function clock()
  if string.sub(CLOCK_SHIFT, 1, 1) == '=' then
    return tonumber(string.sub(CLOCK_SHIFT, 2))
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(CLOCK_SHIFT)
end"""


@cache
def shifted_script(op: Op) -> Script:
    """``op``'s script on the clock its last ``ARGV`` gives (that argument removed)."""
    text = source(op)
    if text.count(_CLOCK) != 1:
        raise AssertionError("common.lua no longer reads TIME as _CLOCK says: update it")
    text = text.replace(_CLOCK, _SHIFTED)
    sha = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()
    return Script(op, text, sha, sha.encode())


@cache
def _ops_by_sha() -> dict[str, Op]:
    return {script(op).sha: op for op in Op}


class ShiftedRedisStore(RedisStore):
    """A view of ``base`` (its client, connections and records) on a clock ``offset_us``
    later, or (``frozen``) standing at ``offset_us``. Closing it leaves ``base`` open."""

    def __init__(self, base: RedisStore, offset_us: int, frozen: bool) -> None:  # a view
        self.__dict__.update(base.__dict__)
        self._offset_us, self._frozen = int(offset_us), frozen
        self._offset_arg = f"{'=' if frozen else ''}{self._offset_us}".encode()

    def _eval(self, op: Op, keys: tuple[str, ...], args: tuple[bytes, ...], job_id: str) -> Any:
        lua, args = shifted_script(op), (*args, self._offset_arg)
        try:
            if (wire := self._wire) is not None:
                return wire.script(command(lua.sha_bytes, keys, args), lua.source)
            return drive(_flows.evalsha(lua, keys, args), self._perform)
        except REDIS_ERRORS as exc:
            raise translate(exc, op.value, self.where, job_id) from exc

    def _perform(self, action: _flows.Action) -> Any:
        if isinstance(action, _flows.Eval):
            return self._eval(action.op, action.keys, action.args, action.job_id)
        if isinstance(action, _flows.Call):
            method, args = self._call(action.method, action.args)
            reply = _flows.Call(method, args, action.options).send(self.client)
            return self._reply(action.method, reply)
        calls = tuple(self._call(method, args) for method, args in action.calls)
        replies = _flows.Pipeline(calls, action.raise_on_error).send(self.client)
        return [
            self._reply(method, reply)
            for (method, _), reply in zip(action.calls, replies, strict=True)
        ]

    def _call(self, method: str, args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
        """A call of one of the store's scripts sent as its shifted variant."""
        if method == "evalsha" and (op := _ops_by_sha().get(args[0])) is not None:
            return method, (shifted_script(op).sha, *args[1:], self._offset_arg)
        cluster = method == "execute_command" and args[0] == "EVALSHA"
        if cluster and (op := _ops_by_sha().get(args[1])) is not None:
            return method, ("EVALSHA", shifted_script(op).sha, *args[2:], self._offset_arg)
        if method == "script_load":
            sha = hashlib.sha1(args[0].encode("utf-8"), usedforsecurity=False).hexdigest()
            if (op := _ops_by_sha().get(sha)) is not None:
                return method, (shifted_script(op).source,)
        return method, args

    def _reply(self, method: str, reply: Any) -> Any:
        """A ``TIME`` reply read on the view's clock."""
        if method != "time" or isinstance(reply, Exception):
            return reply
        now = 0 if self._frozen else int(reply[0]) * 1_000_000 + int(reply[1])
        return divmod(now + self._offset_us, 1_000_000)

    def close(self) -> None:
        pass  # the connections are the base store's

    def __repr__(self) -> str:
        at = f"at {self._offset_us}" if self._frozen else f"{self._offset_us:+d}"
        return f"<RedisStore {self.where}, clock {at} µs (test view)>"
