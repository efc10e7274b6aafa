"""ag-ui-strands behind uvicorn, for scripts/compare.sh: one Strands agent, no tools, whose
model is the bench's fake OpenAI-compatible upstream (AGUI_BENCH_UPSTREAM, e.g.
http://127.0.0.1:PORT/v1); serves AG-UI on POST / at 127.0.0.1:PORT (PORT from the env)."""

import os

import uvicorn
from ag_ui_strands import StrandsAgent, create_strands_app
from openai import AsyncOpenAI
from strands import Agent
from strands.models.openai import OpenAIModel

# One OpenAI client for every run, so upstream connections are pooled (as the gateway's are);
# with `client_args` Strands would build a client, and a connection, per request.
client = AsyncOpenAI(base_url=os.environ["AGUI_BENCH_UPSTREAM"], api_key="bench")
model = OpenAIModel(client=client, model_id="bench-model")
# callback_handler=None: the default handler prints every token to stdout.
agent = Agent(model=model, callback_handler=None)
app = create_strands_app(
    StrandsAgent(agent=agent, name="bench"), path="/", origins=["http://127.0.0.1"]
)

if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(os.environ["PORT"]),
        access_log=False,
        log_level="warning",
    )
