// Markdown tables and number formats shared by the report's sections.

export const f1 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n >= 100 ? n.toFixed(0) : n.toFixed(1));
export const f2 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n.toFixed(2));
export const f3 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n.toFixed(3));

/** A Markdown table: a header row, its rule, then the body rows. */
export function table(head: string[], body: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...body.map(line)].join('\n');
}

/** The `n` value cells of a row that was not measured, each saying why (an empty cell would not). */
export const notMeasured = (why: string, n: number): string[] => Array.from({ length: n }, () => `not measured: ${why}`);
