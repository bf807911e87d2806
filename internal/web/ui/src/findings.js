// Findings with their recommendations, each linking to where a view shows it.
import { el } from './fmt.js';

export function findingsList(fs, onClick) {
  const box = el('div', { class: 'findings', 'data-testid': 'findings' }, el('h3', {}, `Findings (${fs.length})`));
  for (const f of fs) {
    box.append(el('div', { class: 'finding ' + f.severity },
      el('b', {}, `[${f.severity}] ${f.id}`), ' ', f.message,
      f.recommendation ? el('p', { class: 'rec' }, f.recommendation) : null,
      onClick ? el('a', { href: '#', onclick: (e) => { e.preventDefault(); onClick(f); } }, 'show') : null));
  }
  return box;
}

