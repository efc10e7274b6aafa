"""pydantic-ai's AG-UI adapter behind uvicorn, for scripts/compare.sh: one agent, no tools,
whose model is the bench's fake OpenAI-compatible upstream (AGUI_BENCH_UPSTREAM, e.g.
http://127.0.0.1:PORT/v1); serves AG-UI on POST / at 127.0.0.1:PORT (PORT from the env)."""

import os

import uvicorn
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

provider = OpenAIProvider(base_url=os.environ["AGUI_BENCH_UPSTREAM"], api_key="bench")
agent = Agent(OpenAIChatModel("bench-model", provider=provider))


async def run(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=agent)


app = Starlette(routes=[Route("/", run, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(os.environ["PORT"]),
        access_log=False,
        log_level="warning",
    )
