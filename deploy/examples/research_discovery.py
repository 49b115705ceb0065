#!/usr/bin/env python3
"""A deep-research discovery stream written outside Rust (exec handler).

Run it as the discovery agent of the built-in `deep-research` pipeline:

    caucus-worker --agent research_discovery --slots 5 \
        --handler "exec:python3 deploy/examples/research_discovery.py catalogue.json"

It searches a catalogue of candidate sources (a JSON list of
{"title", "url", "aspects": [...], "topics": [...], "credibility"?}) for the
topic (the task's `item`) and the aspect its stream covers (stream N takes
ASPECTS[N-1]), and answers with the output the coordinator's discovery gate
reads (docs/RESEARCH.md):

  sources  [{id, title, url, domain, aspect, credibility, stream}]
  writes   [{key, value}] -- only under streams/stream-N/, the stream's key
           space; anything else would be refused by the coordinator

A real agent would query a search API here instead of a file. Standard
library only; the same task and catalogue always give the same answer.
"""

import json
import sys
from urllib.parse import urlparse

ASPECTS = ["background", "recent developments", "quantitative evidence",
           "expert opinion", "counterarguments"]


def fail(error_type, message, transient=False):
    print(json.dumps({"error": {"class": "transient" if transient else "permanent",
                                "error_type": error_type, "message": message}}))
    sys.exit(75 if transient else 1)


def main():
    task = json.load(sys.stdin)
    if len(sys.argv) < 2:
        fail("bad_config", "usage: research_discovery.py CATALOGUE.json")
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            catalogue = json.load(f)
    except OSError as e:
        fail("catalogue_unavailable", str(e), transient=True)
    stream = (task.get("shard") or 0) + 1
    aspect = ASPECTS[(stream - 1) % len(ASPECTS)]
    topic = task["item"].lower()
    found = [c for c in catalogue
             if aspect in c.get("aspects", [])
             and any(t.lower() in topic or topic in t.lower() for t in c.get("topics", []))]
    sources = [{
        "id": f"s{stream}-{i + 1}",
        "title": c["title"],
        "url": c["url"],
        "domain": urlparse(c["url"]).hostname or "unknown",
        "aspect": aspect,
        "credibility": c.get("credibility", 60),
        "stream": stream,
    } for i, c in enumerate(found)]
    space = f"streams/stream-{stream}"
    listing = "".join(f"- [{s['title']}]({s['url']})\n" for s in sources)
    print(json.dumps({
        "stream": stream,
        "aspect": aspect,
        "sources": sources,
        "search_history": [f"{task['item']} {aspect}"],
        "writes": [
            {"key": f"{space}/sources.md", "value": f"# Stream {stream}: {aspect}\n\n{listing}"},
            {"key": f"{space}/progress.md",
             "value": f"Status: COMPLETE\nResults: {len(sources)} sources\nHandoffReady: true\n"},
        ],
    }))


if __name__ == "__main__":
    main()
