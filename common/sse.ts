// Server-sent events (text/event-stream), written the same way by the
// engine's generate_stream and the gateway's stream route: one event is an
// optional `event:` line, the value as JSON on one `data:` line (JSON.stringify
// never writes a newline, so a value cannot break out of its line), and the
// blank line that ends the event.

/** The text of one event carrying `data` as JSON, named `event` when given. */
export function sseEvent(data: unknown, event?: string): string {
  return `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
}
