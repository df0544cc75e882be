"""The service's one settings object, read from the environment (prefix ``FOLDWISE_``)."""

from __future__ import annotations

import ipaddress
import os
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

LOOPBACK_NAMES = ("localhost",)


def ip_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address (``[::1]`` too); None for a name or a socket path."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only reaches this machine."""
    if host in LOOPBACK_NAMES:
        return True
    address = ip_address(host)
    if address is None:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1, from a dual-stack socket
    return (mapped or address).is_loopback


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FOLDWISE_", env_file=".env", extra="ignore")

    database_url: str = Field(
        "sqlite:///./foldwise.db",
        description="SQLAlchemy URL; postgresql+psycopg://... in production",
    )
    host: str = "127.0.0.1"
    port: int = 8000
    upgrade_db: bool = Field(False, description="Upgrade an outdated schema on start")
    ray_address: str | None = Field(None, description="host:6379 of a Ray cluster; unset = local")
    ray_num_cpus: float | None = Field(None, description="Logical CPUs of a local Ray")
    max_idle_worker_groups: int = Field(8, ge=0, description="Warm DDP worker groups kept idle")
    scheduler_enabled: bool = Field(True, description="Run studies; off for a read-only API")
    poll_seconds: float = Field(1.0, gt=0, description="How often the scheduler looks for work")
    artifact_dir: str = Field(
        "./foldwise-artifacts",
        description="Where fold checkpoints and models are kept: a local directory or an fsspec "
        "URL (s3://bucket/prefix); only the service writes there, workers send through Ray",
    )
    code_cache_dir: str = Field(
        "./foldwise-code",
        description="Where this instance unpacks the task code studies run (a folder per "
        "content hash, kept in the artifact store) for Ray to send to the workers",
    )
    api_db_connections: int = Field(
        32, ge=1, le=256, description="Database work the API runs at once (its pool's size)"
    )
    scheduler_db_connections: int = Field(
        4, ge=1, le=256, description="Database work the scheduler runs at once (its own pool)"
    )
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="Largest request body accepted; larger is a 413"
    )
    max_header_bytes: int = Field(
        32 * 1024,
        ge=4096,
        description="Largest request line and headers together; larger is a 431 (foldwise serve)",
    )
    read_cache_bytes: int = Field(
        32 * 1024 * 1024, ge=0, description="Memory for serialised answers to repeated reads"
    )
    check_cluster_fit: bool = Field(
        True,
        description="Refuse a study whose fold run the cluster as it is cannot place; off for "
        "a cluster that grows on demand (an autoscaler)",
    )
    access_log: bool = Field(False, description="Log every request (uvicorn's access log)")
    auth: bool = Field(
        True,
        description="Every route but /health needs a bearer token; off only on a loopback host",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["127.0.0.1", "localhost", "[::1]"],
        description="Host headers the service answers, comma-separated (DNS rebinding); * any",
    )
    task_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Packages (comma-separated) whose modules a study may name as its task",
    )
    scheduler_lease_seconds: float = Field(
        15.0, ge=2, le=600, description="How long the scheduling instance's lease lasts unrenewed"
    )
    report_tick_seconds: float = Field(
        0.2,
        gt=0,
        le=5,
        description="How often the scheduler writes the epoch reports and artifact records that "
        "came in, in one transaction (what a killed service may lose of them)",
    )
    executor: Literal["ray", "simulated"] = Field(
        "ray",
        description="What runs fold runs: Ray, or a simulated cluster for tests and benchmarks "
        "(allowed only on a loopback host)",
    )
    simulated_cluster: str = Field(
        "{}",
        description="The simulated cluster's shape as JSON (service.executor.simulated."
        "SimulatedCluster), with FOLDWISE_EXECUTOR=simulated",
    )

    @field_validator("artifact_dir", "code_cache_dir", mode="before")
    @classmethod
    def _path_as_text(cls, value: Any) -> Any:
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("allowed_hosts", "task_modules", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _simulated_only_on_loopback(self) -> Settings:
        if self.executor == "simulated" and not is_loopback(self.host):
            raise ValueError(
                f"FOLDWISE_EXECUTOR=simulated is for tests and benchmarks, allowed only on a "
                f"loopback host, and the service listens on {self.host}: unset it to run on Ray"
            )
        return self

    @model_validator(mode="after")
    def _auth_off_only_on_loopback(self) -> Settings:
        if not self.auth and not is_loopback(self.host):
            raise ValueError(
                f"FOLDWISE_AUTH=false is allowed only on a loopback host, and the service "
                f"listens on {self.host}: keep auth on, or bind 127.0.0.1"
            )
        return self


@lru_cache
def get_settings() -> Settings:
    return Settings()
