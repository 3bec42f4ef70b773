/** Colour for people's output; chalk is loaded only when a table or message is coloured. */
export interface Style {
  ok(text: string): string;
  bad(text: string): string;
  warn(text: string): string;
  dim(text: string): string;
  bold(text: string): string;
}

const plain: Style = { ok: (t) => t, bad: (t) => t, warn: (t) => t, dim: (t) => t, bold: (t) => t };

export async function loadStyle(color: boolean): Promise<Style> {
  if (!color) return plain;
  const { Chalk } = await import('chalk');
  const chalk = new Chalk({ level: 1 });
  return { ok: chalk.green, bad: chalk.red.bold, warn: chalk.yellow, dim: chalk.dim, bold: chalk.bold };
}
