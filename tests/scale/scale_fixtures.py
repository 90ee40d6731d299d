"""Records of `harness scale` *constructed here*, not measured: lines with known
slopes and intercepts (plus chosen residuals), so the fit can be checked exactly."""

from harness import results, workloads
from harness.units import MIB


def cell(workload="rnn_fanout", framework="reference", batch=None, **overrides):
    out = {"workload": workload, "size": "small", "dtype": "float32", "framework": framework, "mode": "eager",
           "device": "cpu", "optimizer": None, "remat": "none", "order": "heap" if framework == "reference" else None,
           "batch": batch}
    out.update(overrides)
    return out


def record(batch, fixed, per_sample, retained=0, noise=0, first_extra=0, status="ok", traced=None, **cell_keys):
    """A record whose step peak (total, backward) is fixed + per_sample x batch + noise,
    forward half of it; footprint = retained + step peak; the first step `first_extra`
    bytes above the steady one."""
    c = cell(batch=batch, **cell_keys)
    if status != "ok":
        return results.new_record(c, status, f"made-up {status} at batch {batch}")
    total = int(fixed + per_sample * (batch or 16) + noise)  # None: a sweep's record, the size's batch
    peak = {"forward": total // 2, "backward": total, "total": total}
    first = {k: v + first_extra for k, v in peak.items()}
    return results.new_record(
        c, "ok", provenance={},
        retained_bytes=retained, retained_detail_bytes={"anon": retained, "file": 0, "shmem": 0},
        peak_bytes=peak, footprint_bytes={k: v + retained for k, v in peak.items()},
        first_step_retained_bytes=0, first_step_retained_detail_bytes={"anon": 0, "file": 0, "shmem": 0},
        first_step_peak_bytes=first, first_step_footprint_bytes=dict(first),
        live_bytes={}, bound_bytes=workloads.bound_bytes(c["workload"], c["size"], c["dtype"], batch),
        tracemalloc_peak_bytes=traced and {"total": int(traced[0] + traced[1] * batch)},
    )
