// Parse mermaid diagrams with mermaid's own parser, in Node, without a browser.
//
//   node tests/mermaid/parse.mjs MERMAID_ESM_MIN_MJS < diagrams.json > results.json
//
// stdin: a JSON list of diagram texts; stdout: a JSON list, one {"ok": true, "type": ...} or
// {"ok": false, "error": ...} per diagram. mermaid.parse() runs the diagram type's parser
// (flowchart: its jison grammar) and fills the diagram's model, as rendering does first.
// The bundle's DOMPurify needs a `window` to exist at import; a document it cannot use makes it
// return text unchanged (it sanitizes labels for rendering, which parsing does not need).
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

class Element {}
globalThis.window = {
  document: { nodeType: 9, implementation: {}, createElement: () => ({}) },
  Element,
};

const { default: mermaid } = await import(pathToFileURL(process.argv[2]).href);
mermaid.initialize({ startOnLoad: false });
const texts = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const text of texts) {
  try {
    const r = await mermaid.parse(text);
    out.push({ ok: true, type: r.diagramType });
  } catch (e) {
    out.push({ ok: false, error: String(e && e.message || e) });
  }
}
process.stdout.write(JSON.stringify(out));
