"""The two drivers of the Redis store's operations: one per redis-py client flavour.

An operation is a generator of :class:`~contextfold.stores._redis_layout.Cmd`,
:class:`~contextfold.stores._redis_layout.Script` and
:class:`~contextfold.stores._redis_layout.Pipeline` steps (see
:mod:`contextfold.stores.redis`); :func:`run_commands` answers them with a sync client
(``redis.Redis`` or ``redis.cluster.RedisCluster``) and :func:`arun_commands` with an asyncio
one, both through the library's one driver loop. Scripts go by their SHA and are sent again
with their source when the server does not know them yet (after a restart or a failover).
"""

from __future__ import annotations

from typing import Any, TypeVar

from contextfold._drive import adrive, drive
from contextfold.stores._redis_layout import SCRIPTS, Cmd, Pipeline, RedisOp, Script

__all__ = ["arun_commands", "redis_errors", "run_commands"]

T = TypeVar("T")


def _queue(pipe: Any, step: Cmd | Script) -> None:
    """Add one step to a redis-py pipeline."""
    if isinstance(step, Script):
        pipe.evalsha(SCRIPTS[step.name][1], len(step.keys), *step.keys, *step.args)
    else:
        pipe.execute_command(*step.args)


def _commands_only(step: Pipeline) -> bool:
    """Whether a pipeline holds no script: a cluster pipeline takes it, grouped by node.

    redis-py refuses scripts in a cluster pipeline, so those steps run one at a time there.
    """
    return not any(isinstance(part, Script) for part in step.steps)


def redis_errors() -> tuple[type[Exception], ...]:
    """What a failed step raises: a cluster client's own errors are not RedisErrors."""
    import redis.exceptions

    return (redis.exceptions.RedisError, redis.exceptions.RedisClusterException)


def _no_script(step: Cmd | Script, reply: Any) -> bool:
    """Whether a pipelined script failed only because the server does not know it yet."""
    import redis.exceptions

    return isinstance(step, Script) and isinstance(reply, redis.exceptions.NoScriptError)


def run_commands(client: Any, op: RedisOp[T]) -> T:
    """Run ``op`` on a sync client; redis-py's errors propagate."""
    import redis.cluster
    import redis.exceptions

    # redis-py refuses scripts in a cluster pipeline: on a cluster those steps run in turn.
    cluster = isinstance(client, redis.cluster.RedisCluster)

    def one(step: Cmd | Script) -> Any:
        if isinstance(step, Script):
            source, sha = SCRIPTS[step.name]
            argv = (len(step.keys), *step.keys, *step.args)
            try:
                return client.evalsha(sha, *argv)
            except redis.exceptions.NoScriptError:
                return client.eval(source, *argv)
        return client.execute_command(*step.args)

    def answer(step: Cmd | Script | Pipeline) -> Any:
        if not isinstance(step, Pipeline):
            return one(step)
        if cluster and not _commands_only(step):
            replies: list[Any] = []
            for part in step.steps:
                try:
                    replies.append(one(part))
                except redis_errors() as exc:
                    replies.append(exc)
            return replies
        pipe = client.pipeline() if cluster else client.pipeline(transaction=False)
        for part in step.steps:
            _queue(pipe, part)
        done = pipe.execute(raise_on_error=False)
        return [one(p) if _no_script(p, r) else r for p, r in zip(step.steps, done, strict=True)]

    return drive(op, answer)


async def arun_commands(client: Any, op: RedisOp[T]) -> T:
    """Async :func:`run_commands` for a ``redis.asyncio`` client."""
    import redis.asyncio.cluster
    import redis.exceptions

    cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)

    async def one(step: Cmd | Script) -> Any:
        if isinstance(step, Script):
            source, sha = SCRIPTS[step.name]
            argv = (len(step.keys), *step.keys, *step.args)
            try:
                return await client.evalsha(sha, *argv)
            except redis.exceptions.NoScriptError:
                return await client.eval(source, *argv)
        return await client.execute_command(*step.args)

    async def answer(step: Cmd | Script | Pipeline) -> Any:
        if not isinstance(step, Pipeline):
            return await one(step)
        replies: list[Any] = []
        if cluster and not _commands_only(step):
            for part in step.steps:
                try:
                    replies.append(await one(part))
                except redis_errors() as exc:
                    replies.append(exc)
            return replies
        pipe = client.pipeline() if cluster else client.pipeline(transaction=False)
        for part in step.steps:
            _queue(pipe, part)
        for part, reply in zip(step.steps, await pipe.execute(raise_on_error=False), strict=True):
            replies.append(await one(part) if _no_script(part, reply) else reply)
        return replies

    return await adrive(op, answer)
