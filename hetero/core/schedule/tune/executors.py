"""Where the tuner measures candidates: the executor a spec names (``hetero tune --executor``).

- ``local`` (the default): one local worker process, rebuilt when a candidate kills it
  (:func:`~hetero.core.schedule.tune.measure.local_pool`); ``local:N``: N of them, so N
  candidates are measured at once.
- ``dask://HOST:PORT``: the workers of the Dask distributed cluster whose scheduler is at
  that address (``pip install 'hetero[tune]'``), one candidate per worker thread at once.
  Dask runs work on threads, so there each candidate runs in a child forked from its
  worker (:mod:`~hetero.core.schedule.tune.measure`): a crash or a hang fails its trial
  and the worker lives on.

A factory's ``batch``, the candidates in flight, is also the search's round size
(:meth:`~hetero.core.schedule.tune.search.TaskSearch.run`), so ``local:2`` and a cluster
of two worker threads, with the same seed, measure the same points. Its
:attr:`~ExecutorFactory.on_workers` asks every worker a question (the tuner asks the
backend's machine identity, which the records then carry: the workers', not this
process's).

No candidate kills a Dask worker, so the scheduler's ``allowed-failures`` (how often a
task that was running on a lost worker is retried elsewhere) matters only for a worker
lost for other reasons; it is the scheduler's own setting, which a client does not
change for everyone else who uses the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

from hetero.core.schedule.tune.measure import local_pool
from hetero.errors import OptionError

#: Seconds to wait for a Dask scheduler to answer, and for its first worker to join.
CONNECT_TIMEOUT_S = 10.0

FORMS = "local, local:N (N worker processes) or dask://HOST:PORT (a Dask scheduler)"


def _here(question: Callable[[], Any]) -> list[Any]:
    """Local workers are forked from this process, on this machine: it answers for them."""
    return [question()]


@dataclass
class ExecutorFactory:
    """What a spec names: calling it makes an executor (again after one breaks);
    ``batch`` candidates are measured at once; ``where`` says where, for the log;
    ``on_workers(question)`` is ``question()`` answered by every worker process, a list.
    :meth:`close` lets go of what the factory holds (a Dask client)."""

    make: Callable[[], Executor]
    batch: int
    where: str
    on_workers: Callable[[Callable[[], Any]], list[Any]] = field(default=_here, repr=False)
    release: Callable[[], None] = field(default=lambda: None, repr=False)

    def __call__(self) -> Executor:
        return self.make()

    def close(self) -> None:
        """Release the factory's resources; executors it made must be shut down first."""
        self.release()

    def __enter__(self) -> ExecutorFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def executor_factory(spec: str = "local", connect_timeout_s: float = CONNECT_TIMEOUT_S) -> ExecutorFactory:
    """The factory ``spec`` names (see the module's docstring); an :class:`OptionError`
    naming the spec when it is malformed, Dask is missing or its scheduler does not answer
    within ``connect_timeout_s``."""
    if spec == "local":
        return ExecutorFactory(local_pool(1), 1, "1 local process")
    if spec.startswith("local:"):
        count = spec[len("local:"):]
        if not count.isdigit() or int(count) < 1:
            raise OptionError(f"executor {spec!r}: local:N needs a number of processes N >= 1, e.g. local:2")
        return ExecutorFactory(local_pool(int(count)), int(count), f"{int(count)} local processes")
    if spec.startswith("dask://"):
        return _dask(spec, connect_timeout_s)
    raise OptionError(f"executor {spec!r}: not an executor; give {FORMS}")


def _dask(spec: str, timeout_s: float) -> ExecutorFactory:
    """A factory of executors on the Dask cluster at ``spec``'s address."""
    host, _, port = spec[len("dask://"):].rpartition(":")
    if not host or not port.isdigit():
        raise OptionError(f"executor {spec!r}: give the scheduler's address as dask://HOST:PORT "
                          "(e.g. dask://127.0.0.1:8786)")
    try:
        from distributed import Client
    except ImportError:
        raise OptionError(f"executor {spec!r} needs Dask distributed, which is not installed: "
                          "pip install 'hetero[tune]'") from None
    address = f"tcp://{host}:{port}"
    try:
        client = Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise OptionError(f"executor {spec!r}: no Dask scheduler answered at {address} within {timeout_s:g} s "
                          f"({exc}); start one there (`dask scheduler`, then `dask worker {address}`) "
                          "or give its address") from None
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except (OSError, TimeoutError):
        client.close()
        raise OptionError(f"executor {spec!r}: the Dask scheduler at {address} has no workers after "
                          f"{timeout_s:g} s; start some (`dask worker {address}`)") from None
    threads = sum(client.nthreads().values())
    return ExecutorFactory(lambda: _ClientPool(client), threads, f"{threads} Dask worker threads at {address}",
                           lambda question: list(client.run(question).values()), client.close)


class _ClientPool(Executor):
    """A Dask client's executor (one candidate a task, never cached: ``pure=False``),
    with the ``cancel_futures`` of :meth:`Executor.shutdown` that Dask's lacks (its
    ``shutdown(wait=False)`` cancels what is in flight)."""

    def __init__(self, client: Any) -> None:
        self._pool = client.get_executor(pure=False)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait and not cancel_futures)
