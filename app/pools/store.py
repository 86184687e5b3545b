"""Pools in the database. Functions take the session, flush and never commit: the caller's one
transaction writes a pool with all its members or nothing.

Pools are read as :class:`StoredPool` values (plain data, members with their GPU profiles'
figures), which is what the API shows (:func:`as_dict`) and what a pool plan starts from
(:func:`load_pool`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.common.names import echo
from app.common.words import count
from app.db.models import GpuProfile, Pool, PoolMember, Series, SeriesDeployment, utcnow
from app.errors import ConflictError, InputError, NotFoundError
from app.pools.spec import PRIORITIES, PoolFields, PoolMemberIn, validate_pool_name

if TYPE_CHECKING:
    import capacity


@dataclass(frozen=True)
class StoredMember:
    """A member series with the figures of its GPU profile (per GPU, per replica)."""

    series: str
    series_id: int
    profile: str
    priority: str
    spot_ok: bool
    gpu_type: str
    gpus_per_replica: int
    tokens_per_s_per_gpu: float


@dataclass(frozen=True)
class StoredPool:
    """A pool as stored; prices are USD per node-hour, members in the order they were given."""

    name: str
    gpu_type: str | None
    gpus_per_node: int
    on_demand_usd_per_hour: float
    reserved_usd_per_hour: float | None
    spot_usd_per_hour: float | None
    quota_nodes: int | None
    spot_interruption: float
    members: tuple[StoredMember, ...]
    created_at: datetime
    updated_at: datetime

    def node_prices(self) -> capacity.Prices:
        """The node prices as :class:`capacity.Prices` (USD per node-hour, not per GPU)."""
        import capacity

        return capacity.Prices(
            on_demand_usd_per_hour=self.on_demand_usd_per_hour,
            reserved_usd_per_hour=self.reserved_usd_per_hour,
            spot_usd_per_hour=self.spot_usd_per_hour,
        )

    def check(self) -> StoredPool:
        """``self`` if every member's GPU profile still fits the pool's nodes, else an
        :class:`InputError` naming the member (a profile may have been changed since)."""
        for member in self.members:
            problem = _fit_problem(
                profile=member.profile,
                profile_gpu_type=member.gpu_type,
                gpus_per_replica=member.gpus_per_replica,
                gpu_type=self.gpu_type,
                gpus_per_node=self.gpus_per_node,
            )
            if problem is not None:
                raise InputError(
                    f"pool {echo(self.name)}, member {echo(member.series)}: {problem}; "
                    "give the member another profile, or change the profile or the pool"
                )
        return self


# -- writes -----------------------------------------------------------------------------------


def create_pool(session: Session, *, name: str, fields: PoolFields) -> StoredPool:
    """Store a new pool with its members; 409 if the name is taken, 422 for a bad member."""
    validate_pool_name(name)
    if session.scalar(select(Pool.id).where(Pool.name == name)) is not None:
        raise ConflictError(
            f"pool {name!r} already exists (PUT /v1/pools/{name} or 'gpucast pool update' "
            "replaces it)"
        )
    resolved = _resolve_members(session, fields)
    now = utcnow()
    pool = Pool(name=name, created_at=now, updated_at=now, **_columns(fields))
    session.add(pool)
    try:
        session.flush()
    except IntegrityError as exc:  # created meanwhile by another transaction
        raise ConflictError(f"pool {name!r} already exists") from exc
    _add_members(session, pool_id=pool.id, resolved=resolved)
    return get_pool(session, name=name)


def replace_pool(session: Session, *, name: str, fields: PoolFields) -> StoredPool:
    """Replace every setting and the whole member list of an existing pool (a PUT): an
    unknown pool is a 404, a bad member a 422 (and the pool stays as it was)."""
    pool = _pool_row(session, name=name)
    resolved = _resolve_members(session, fields)
    for key, value in _columns(fields).items():
        setattr(pool, key, value)
    pool.updated_at = utcnow()
    session.execute(delete(PoolMember).where(PoolMember.pool_id == pool.id))
    _add_members(session, pool_id=pool.id, resolved=resolved)
    return get_pool(session, name=name)


def delete_pool(session: Session, *, name: str) -> None:
    """Delete a pool and its members (the series and GPU profiles stay)."""
    pool = _pool_row(session, name=name)
    session.execute(delete(PoolMember).where(PoolMember.pool_id == pool.id))
    session.delete(pool)
    session.flush()


# -- reads ------------------------------------------------------------------------------------


def get_pool(session: Session, *, name: str) -> StoredPool:
    """The pool named ``name`` with its members; 404 if there is none."""
    pool = _pool_row(session, name=name)
    return _stored(pool, _members_by_pool(session, pool_ids=[pool.id]).get(pool.id, []))


def list_pools(session: Session) -> list[StoredPool]:
    """Every pool, by name, with its members (two queries in all)."""
    pools = list(session.scalars(select(Pool).order_by(Pool.name)))
    members = _members_by_pool(session, pool_ids=None)
    return [_stored(pool, members.get(pool.id, [])) for pool in pools]


def load_pool(session: Session, *, name: str) -> StoredPool:
    """What a pool plan starts from: the pool with its members' profile figures, checked
    again (:meth:`StoredPool.check`), since a GPU profile can change after it joined."""
    return get_pool(session, name=name).check()


def as_dict(pool: StoredPool) -> dict[str, Any]:
    """The JSON shape of the API and of ``gpucast pool show --json``."""
    return {
        "name": pool.name,
        "gpu_type": pool.gpu_type,
        "gpus_per_node": pool.gpus_per_node,
        "node_prices": {
            "on_demand_usd_per_hour": pool.on_demand_usd_per_hour,
            "reserved_usd_per_hour": pool.reserved_usd_per_hour,
            "spot_usd_per_hour": pool.spot_usd_per_hour,
        },
        "quota_nodes": pool.quota_nodes,
        "spot_interruption": pool.spot_interruption,
        "members": [
            {
                "series": m.series,
                "profile": m.profile,
                "priority": m.priority,
                "spot_ok": m.spot_ok,
                "gpus_per_replica": m.gpus_per_replica,
                "tokens_per_s_per_gpu": m.tokens_per_s_per_gpu,
            }
            for m in pool.members
        ],
        "created_at": pool.created_at,
        "updated_at": pool.updated_at,
    }


# -- helpers ----------------------------------------------------------------------------------


def _pool_row(session: Session, *, name: str) -> Pool:
    pool = session.scalar(select(Pool).where(Pool.name == name))
    if pool is None:
        raise NotFoundError(f"pool {echo(name)} not found")
    return pool


def _columns(fields: PoolFields) -> dict[str, Any]:
    prices = fields.node_prices
    return {
        "gpu_type": fields.gpu_type,
        "gpus_per_node": fields.gpus_per_node,
        "node_usd_per_hour_on_demand": prices.on_demand_usd_per_hour,
        "node_usd_per_hour_reserved": prices.reserved_usd_per_hour,
        "node_usd_per_hour_spot": prices.spot_usd_per_hour,
        "quota_nodes": fields.quota_nodes,
        "spot_interruption": fields.spot_interruption,
    }


def _resolve_members(
    session: Session, fields: PoolFields
) -> list[tuple[PoolMemberIn, int, GpuProfile]]:
    """Each member with its series id and GPU profile, or an InputError naming the first
    member that is listed twice, names an unknown series or profile, or does not fit."""
    members = fields.members
    first_at: dict[str, int] = {}
    for position, member in enumerate(members):
        if member.priority not in PRIORITIES:  # pydantic refuses it first; callers may not
            raise InputError(
                f"members[{position}]: priority {echo(member.priority)} is not one of "
                f"{', '.join(PRIORITIES)}"
            )
        if member.series in first_at:
            raise InputError(
                f"members[{position}]: series {echo(member.series)} is listed twice (also "
                f"members[{first_at[member.series]}]); a series is a member of a pool once"
            )
        first_at[member.series] = position
    series_ids = _series_ids(session, [m.series for m in members])
    profiles = _profiles(session, [m.profile for m in members if m.profile is not None])
    deployed = _deployed_profiles(session, [m.series for m in members if m.profile is None])
    resolved = []
    for position, member in enumerate(members):
        if member.series not in series_ids:
            raise InputError(f"members[{position}]: series {echo(member.series)} not found")
        where = f"members[{position}] (series {echo(member.series)})"
        if member.profile is None:
            profile = deployed.get(member.series)
            if profile is None:
                raise InputError(
                    f"{where}: no profile given and the series has no deployment; give the "
                    "member's profile or deploy the series ('gpucast series deploy')"
                )
        else:
            profile = profiles.get(member.profile)
        if profile is None:
            raise InputError(f"{where}: GPU profile {echo(member.profile)} not found")
        problem = _fit_problem(
            profile=profile.name,
            profile_gpu_type=profile.gpu_type,
            gpus_per_replica=profile.gpus_per_replica,
            gpu_type=fields.gpu_type,
            gpus_per_node=fields.gpus_per_node,
        )
        if problem is not None:
            raise InputError(f"{where}: {problem}")
        resolved.append((member, series_ids[member.series], profile))
    return resolved


def _fit_problem(
    *,
    profile: str,
    profile_gpu_type: str,
    gpus_per_replica: int,
    gpu_type: str | None,
    gpus_per_node: int,
) -> str | None:
    if gpus_per_replica > gpus_per_node:
        return (
            f"GPU profile {profile!r} needs {count(gpus_per_replica, 'GPU')} per replica, more "
            f"than the pool's {count(gpus_per_node, 'GPU')} per node (a replica must sit on one "
            "node)"
        )
    if gpu_type is not None and profile_gpu_type != gpu_type:
        return (
            f"GPU profile {profile!r} is for {echo(profile_gpu_type)} GPUs; "
            f"the pool's nodes are {echo(gpu_type)}"
        )
    return None


def _series_ids(session: Session, names: Sequence[str]) -> dict[str, int]:
    if not names:
        return {}
    rows = session.execute(select(Series.name, Series.id).where(Series.name.in_(set(names))))
    return {name: series_id for name, series_id in rows}


def _profiles(session: Session, names: Sequence[str]) -> dict[str, GpuProfile]:
    if not names:
        return {}
    rows = session.scalars(select(GpuProfile).where(GpuProfile.name.in_(set(names))))
    return {profile.name: profile for profile in rows}


def _deployed_profiles(session: Session, series_names: Sequence[str]) -> dict[str, GpuProfile]:
    """The GPU profile of each named series' deployment (series without one are left out)."""
    if not series_names:
        return {}
    rows = session.execute(
        select(Series.name, GpuProfile)
        .join(SeriesDeployment, SeriesDeployment.series_id == Series.id)
        .join(GpuProfile, GpuProfile.id == SeriesDeployment.gpu_profile_id)
        .where(Series.name.in_(set(series_names)))
    )
    return {name: profile for name, profile in rows}


def _add_members(
    session: Session, *, pool_id: int, resolved: list[tuple[PoolMemberIn, int, GpuProfile]]
) -> None:
    session.add_all(
        PoolMember(
            pool_id=pool_id,
            series_id=series_id,
            gpu_profile_id=profile.id,
            priority=member.priority,
            spot_ok=member.spot_ok,
        )
        for member, series_id, profile in resolved
    )
    session.flush()


def _members_by_pool(
    session: Session, *, pool_ids: list[int] | None
) -> dict[int, list[StoredMember]]:
    """Members of the given pools (of every pool for None), in the order they were given."""
    query = (
        select(
            PoolMember.pool_id,
            Series.name,
            Series.id,
            GpuProfile.name,
            PoolMember.priority,
            PoolMember.spot_ok,
            GpuProfile.gpu_type,
            GpuProfile.gpus_per_replica,
            GpuProfile.tokens_per_s_per_gpu,
        )
        .join(Series, Series.id == PoolMember.series_id)
        .join(GpuProfile, GpuProfile.id == PoolMember.gpu_profile_id)
        .order_by(PoolMember.pool_id, PoolMember.id)
    )
    if pool_ids is not None:
        query = query.where(PoolMember.pool_id.in_(pool_ids))
    members: dict[int, list[StoredMember]] = defaultdict(list)
    for (
        pool_id,
        series,
        series_id,
        profile,
        priority,
        spot_ok,
        gpu_type,
        tp,
        rate,
    ) in session.execute(query):
        member = StoredMember(
            series=series,
            series_id=series_id,
            profile=profile,
            priority=priority,
            spot_ok=spot_ok,
            gpu_type=gpu_type,
            gpus_per_replica=tp,
            tokens_per_s_per_gpu=rate,
        )
        members[pool_id].append(member)
    return members


def _stored(pool: Pool, members: list[StoredMember]) -> StoredPool:
    return StoredPool(
        name=pool.name,
        gpu_type=pool.gpu_type,
        gpus_per_node=pool.gpus_per_node,
        on_demand_usd_per_hour=pool.node_usd_per_hour_on_demand,
        reserved_usd_per_hour=pool.node_usd_per_hour_reserved,
        spot_usd_per_hour=pool.node_usd_per_hour_spot,
        quota_nodes=pool.quota_nodes,
        spot_interruption=pool.spot_interruption,
        members=tuple(members),
        created_at=pool.created_at,
        updated_at=pool.updated_at,
    )
