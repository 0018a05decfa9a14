"""Claude drives a Hutch sandbox through the tool catalogue.

    ANTHROPIC_API_KEY=… HUTCH_URL=http://127.0.0.1:7070 HUTCH_API_KEY=… \
        python3 examples/anthropic_tools.py "Write fizzbuzz.py, run it to 15, show me the output"

Standard library only: the Messages API is called with urllib.
"""

import json
import os
import sys
import urllib.request

from hutch import Client

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")


def messages(body: dict) -> dict:
    req = urllib.request.Request(
        "https://api.anthropic.com/v1/messages",
        data=json.dumps(body).encode(),
        headers={
            "x-api-key": os.environ["ANTHROPIC_API_KEY"],
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        },
    )
    with urllib.request.urlopen(req, timeout=300) as res:
        return json.load(res)


def main(task: str) -> None:
    with Client() as hutch:
        tools = hutch.list_tools("anthropic")  # name, description, input_schema
        sandbox = hutch.create_sandbox()
        try:
            history = [{"role": "user", "content": task}]
            while True:
                reply = messages({"model": MODEL, "max_tokens": 4096, "tools": tools, "messages": history})
                history.append({"role": "assistant", "content": reply["content"]})
                calls = [b for b in reply["content"] if b["type"] == "tool_use"]
                for block in reply["content"]:
                    if block["type"] == "text":
                        print(block["text"])
                if not calls:
                    return
                results = []
                for call in calls:
                    print(f"→ {call['name']} {json.dumps(call['input'])[:200]}")
                    res = sandbox.run_tool(call["name"], call["input"])
                    results.append({
                        "type": "tool_result",
                        "tool_use_id": call["id"],
                        "content": json.dumps(res.get("result", res.get("error"))),
                        "is_error": res["status"] != "success",
                    })
                history.append({"role": "user", "content": results})
        finally:
            sandbox.delete()


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "What Linux is this sandbox? Use a command to find out.")
