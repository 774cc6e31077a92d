"""envkit's embedded conda engine (py-rattler): conda environments, old Pythons and the cudatoolkit/cuDNN of legacy
conda builds, on machines without any conda."""

from __future__ import annotations

from envkit.backends.base import Context, OnLine
from envkit.backends.plan import Plan


class RattlerBackend:
    name = "rattler"

    def describe(self, plan: Plan, context: Context) -> list[str]:
        assert plan.conda is not None
        cuda = f"__cuda={plan.conda.cuda}" if plan.conda.cuda else "no __cuda"
        return [f"embedded conda engine (py-rattler): solve ({cuda}) and install into {plan.prefix}: "
                f"{' '.join(plan.conda.specs)} from {', '.join(plan.conda.channels)} only"]

    def make_prefix(self, plan: Plan, context: Context, on_line: OnLine) -> None:
        from envkit.backends.conda_engine import CondaSolveRequest, create_prefix
        from envkit.system.egress import guarded, in_this_process

        assert plan.conda is not None
        virtual = (("__cuda", plan.conda.cuda),) if plan.conda.cuda else ()
        request = CondaSolveRequest(channels=plan.conda.channels, specs=plan.conda.specs, virtual_packages=virtual,
                                    platform=plan.profile.platform)  # (linux-aarch64 packages for an aarch64 machine)
        # py-rattler runs in this process and reads its proxy settings from this process's environment
        with guarded("the conda engine", (*plan.conda.channels, *context.mirrors), context.environ) as proxy, \
                in_this_process(proxy):
            create_prefix(plan.prefix, request, context.conda_cache, on_line)
