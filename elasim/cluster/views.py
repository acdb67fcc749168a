"""The active jobs' views, kept in chunks so that a decision rebuilds only what changed.

On an overloaded cluster (the full Philly trace on 64 GPUs) the active jobs are tens of
thousands of waiting ones and a few dozen running ones, and a decision is due at every
arrival and completion.  Copying every view into a fresh tuple per decision made the
run quadratic in the queue.  :class:`ViewChunks` keeps each active job's last view in
the chunk of its arrival rank (``rank // chunk``) and hands the policy a
:class:`~elasim.policies.cluster.JobViews` of the chunks' tuples: only the chunks whose
views changed since the last call are built again, the others are shared.
"""

from __future__ import annotations

from elasim.policies.cluster import ClusterJobView, JobViews

__all__ = ["ViewChunks"]


class ViewChunks:
    """The last view of each active job, by arrival rank, in chunks of ``chunk`` jobs."""

    __slots__ = ("_chunk", "_stale", "_tuples", "_views")

    def __init__(self, chunk: int) -> None:
        self._chunk = chunk
        self._views: dict[int, dict[str, ClusterJobView]] = {}  # chunk -> name -> view
        self._tuples: dict[int, tuple[ClusterJobView, ...]] = {}  # last built, per chunk
        self._stale: set[int] = set()  # chunks to build again

    def get(self, rank: int, name: str) -> ClusterJobView | None:
        """The job's last view (None: not an active job)."""
        members = self._views.get(rank // self._chunk)
        return None if members is None else members.get(name)

    def set(self, rank: int, name: str, view: ClusterJobView) -> None:
        """Keep ``view`` as the job's view (a new job joins after those of lower rank)."""
        chunk = rank // self._chunk
        members = self._views.get(chunk)
        if members is None:
            members = self._views[chunk] = {}
        if members.get(name) is not view:
            members[name] = view
            self._stale.add(chunk)

    def drop(self, rank: int, name: str) -> None:
        """The job is no longer active."""
        chunk = rank // self._chunk
        del self._views[chunk][name]
        self._stale.add(chunk)

    def views(self) -> JobViews:
        """Every active job's view in rank order; only changed chunks are rebuilt."""
        tuples, views = self._tuples, self._views
        for chunk in sorted(self._stale):
            members = views[chunk]
            if members:
                tuples[chunk] = tuple(members.values())
            else:
                del views[chunk]
                tuples.pop(chunk, None)
        # ``tuples`` stays in chunk order: jobs join in rank order, so a chunk is first
        # built (or built again after it emptied) only when no later chunk exists yet
        self._stale.clear()
        return JobViews(tuples.values())
