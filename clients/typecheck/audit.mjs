// The GraphQL-over-HTTP spec's own audits (npm `graphql-http`, `auditServer`) against a
// running stateward server. Usage: STATEWARD_URL=http://127.0.0.1:8000 node audit.mjs
// Prints one JSON object: {"ok": n, "warn": n, "error": n, "results": [{id, name, status, reason}]}.
// Exit status 0 when no audit errors or warns; 1 otherwise (the Python test reads the JSON).
import { auditServer } from 'graphql-http';

const given = (process.env.STATEWARD_URL ?? 'http://127.0.0.1:8000/graphql').replace(/\/$/, '');
const url = given.endsWith('/graphql') ? given : `${given}/graphql`;

const results = await auditServer({ url, fetchFn: fetch });
const rows = [];
for (const result of results) {
  const row = { id: result.id, name: result.name, status: result.status };
  if (result.status !== 'ok') {
    row.reason = result.reason;
    try {
      const response = result.response;
      row.httpStatus = response.status;
      row.contentType = response.headers.get('content-type');
      row.body = (await response.text()).slice(0, 400);
    } catch {
      // the response body may already be consumed or absent
    }
  }
  rows.push(row);
}
const count = (status) => rows.filter((r) => r.status === status).length;
const summary = { ok: count('ok'), warn: count('warn'), error: count('error'), results: rows };
console.log(JSON.stringify(summary));
process.exit(summary.warn === 0 && summary.error === 0 ? 0 : 1);
