"""An OpenAI model drives a Hutch sandbox through the tool catalogue.

    OPENAI_API_KEY=… HUTCH_URL=http://127.0.0.1:7070 HUTCH_API_KEY=… \
        python3 examples/openai_tools.py "Write fizzbuzz.py, run it to 15, show me the output"

Standard library only: Chat Completions is called with urllib.
"""

import json
import os
import sys
import urllib.request

from hutch import Client

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4.1")


def complete(body: dict) -> dict:
    req = urllib.request.Request(
        "https://api.openai.com/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=300) as res:
        return json.load(res)


def main(task: str) -> None:
    with Client() as hutch:
        tools = hutch.list_tools("openai")  # type function, with parameters
        sandbox = hutch.create_sandbox()
        try:
            history = [{"role": "user", "content": task}]
            while True:
                message = complete({"model": MODEL, "tools": tools, "messages": history})["choices"][0]["message"]
                history.append(message)
                if message.get("content"):
                    print(message["content"])
                calls = message.get("tool_calls") or []
                if not calls:
                    return
                for call in calls:
                    name, args = call["function"]["name"], json.loads(call["function"]["arguments"] or "{}")
                    print(f"→ {name} {json.dumps(args)[:200]}")
                    res = sandbox.run_tool(name, args)
                    history.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(res)})
        finally:
            sandbox.delete()


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "What Linux is this sandbox? Use a command to find out.")
