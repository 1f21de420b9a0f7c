// Follow a workflow's events in the browser, and resume after a disconnect without a gap.
// `npm install graphql-ws`, then bundle this module with your app (vite, esbuild, ...).
import { createClient } from "graphql-ws";

const SUBSCRIPTION = `
subscription Follow($workflow: String!, $after: String) {
  events(filter: {workflow: $workflow}, after: $after) {
    cursor type instanceId fromState toState action
  }
}
`;

export function follow({ url, token, workflow, onEvent }) {
  // Where the last page load stopped; "0" replays every event from the start first.
  const key = `stateward-cursor:${workflow}`;
  let last = Number(localStorage.getItem(key) ?? "0");
  const payload = { query: SUBSCRIPTION, variables: { workflow, after: String(last) } };
  const client = createClient({
    url,
    connectionParams: { authorization: `Bearer ${token}` },
    retryAttempts: Infinity, // reconnect after every drop (a node restarting, a flaky network)
    shouldRetry: () => true,
  });
  const dispose = client.subscribe(payload, {
    next: ({ data, errors }) => {
      if (errors) return console.error(errors);
      const event = data.events;
      if (event.cursor <= last) return; // never show an event twice
      last = event.cursor;
      // graphql-ws re-sends this same payload object when it reconnects: moving `after`
      // forward makes the server replay exactly what was missed while disconnected.
      payload.variables.after = String(last);
      localStorage.setItem(key, String(last));
      onEvent(event);
    },
    error: (error) => console.error("subscription ended", error),
    complete: () => {},
  });
  return () => {
    dispose();
    client.dispose();
  };
}
