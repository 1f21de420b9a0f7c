// How a frontend uses the generated types: every request and result below is checked by
// `tsc --strict` against the code GraphQL Code Generator made from docs/schema.graphql.
// The `@ts-expect-error` lines are mistakes the types must catch (tsc fails if they don't).
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { createClient } from 'graphql-ws';

import {
  AssignmentCountsDocument,
  InstanceCountsDocument,
  InstanceDetailDocument,
  InstanceSearchDocument,
  LiveEventsDocument,
  MyAssignmentsDocument,
  type InstanceRowFragment,
  type InstanceSearchQueryVariables,
  type LiveEventsSubscription,
} from '../generated/graphql';

const endpoint = 'http://127.0.0.1:8000/graphql';

interface GraphQLFailure {
  message: string;
  extensions?: { code?: string };
}

class RequestFailed extends Error {
  constructor(readonly errors: readonly GraphQLFailure[]) {
    super(errors.map((e) => `${e.extensions?.code ?? 'ERROR'}: ${e.message}`).join('; '));
  }
}

/** One typed query over GraphQL-over-HTTP: variables and result come from the document. */
async function request<TResult, TVariables>(
  document: TypedDocumentNode<TResult, TVariables>,
  variables: TVariables,
  token?: string,
): Promise<TResult> {
  const response = await fetch(endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json;q=0.9',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify({ query: print(document), variables }),
  });
  const body = (await response.json()) as { data?: TResult | null; errors?: GraphQLFailure[] };
  if (body.errors?.length || body.data == null) {
    throw new RequestFailed(body.errors ?? [{ message: `HTTP ${response.status}` }]);
  }
  return body.data;
}

function row(instance: InstanceRowFragment): string {
  const due = instance.slaDueAt ? ` due ${new Date(instance.slaDueAt).toISOString()}` : '';
  return `${instance.workflowPath} ${instance.instanceId} [${instance.status}] in ${instance.state.key}${due}`;
}

/** Walks every page of a search, newest first. */
export async function searchAll(namespace: string): Promise<string[]> {
  const lines: string[] = [];
  const variables: InstanceSearchQueryVariables = {
    filter: { namespace, status: ['ACTIVE'] },
    orderBy: { field: 'CREATED', direction: 'DESC' },
    first: 50,
  };
  for (;;) {
    const { instances } = await request(InstanceSearchDocument, variables);
    for (const edge of instances.edges) lines.push(row(edge.node));
    const total: number | null | undefined = instances.totalCount;
    if (!instances.pageInfo.hasNextPage || total === 0) return lines;
    variables.after = instances.pageInfo.endCursor;
  }
}

/** The detail screen: a node lookup narrowed to Instance, with its workflow's graph. */
export async function detail(id: string): Promise<string> {
  const { node } = await request(InstanceDetailDocument, { id });
  if (!node || node.__typename !== 'Instance') return 'not an instance';
  const current = node.state.key;
  const graph = node.workflow.graph;
  const reachable = graph.edges.filter((e) => e.source === current).map((e) => e.target);
  const initial = graph.nodes.find((n) => n.initial)?.key ?? '?';
  const actions = node.availableActions.map((a) => a.label ?? a.key).join(', ');
  const open = node.assignments.nodes.filter((a) => a.assignee == null).length;
  const last = node.lastEvents[0];
  // @ts-expect-error headHash is nullable: it cannot be used as a string unchecked
  const short: string = node.headHash.slice(0, 8);
  return `${row(node)} from ${initial} -> ${reachable.join('|')}; actions ${actions}; ${open} open; last ${last?.action ?? '-'} ${short}`;
}

export async function inbox(token: string): Promise<number> {
  const { myAssignments } = await request(MyAssignmentsDocument, { first: 20 }, token);
  const counts = await request(AssignmentCountsDocument, { filter: null }, token);
  const tiles = await request(InstanceCountsDocument, { groupBy: ['WORKFLOW', 'STATUS'] });
  // @ts-expect-error `first` is an Int: a string is refused before anything is sent
  await request(MyAssignmentsDocument, { first: '20' }, token);
  // @ts-expect-error `InstanceGroup` is a closed set
  await request(InstanceCountsDocument, { groupBy: ['COLOUR'] });
  const first = myAssignments.nodes[0];
  // @ts-expect-error `reviewData` was not selected, so it is not on the result type
  void first?.reviewData;
  return (
    myAssignments.nodes.length +
    counts.assignmentCounts.reduce((n, c) => n + c.count, 0) +
    tiles.instanceCounts.length
  );
}

/** A live view over graphql-transport-ws that remembers the cursor it has seen. */
export function watch(namespace: string, token: string, onEvent: (line: string) => void): () => void {
  const client = createClient({ url: endpoint.replace(/^http/, 'ws'), connectionParams: { authorization: `Bearer ${token}` } });
  let cursor: string | undefined;
  const stop = client.subscribe<LiveEventsSubscription>(
    { query: print(LiveEventsDocument), variables: { filter: { namespace } } },
    {
      next: ({ data }) => {
        if (!data) return;
        const event = data.events;
        cursor = String(event.cursor);
        onEvent(`${cursor} ${event.type} ${event.instanceId ?? ''} ${event.fromState ?? ''}->${event.toState ?? ''}`);
      },
      error: (error) => onEvent(`ended: ${String(error)} (resume after ${cursor ?? 'the start'})`),
      complete: () => onEvent('complete'),
    },
  );
  return () => {
    stop();
    void client.dispose();
  };
}
