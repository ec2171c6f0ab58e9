// On a phone a table in a lesson is shown row by row (fromscratch.css): each cell is
// labelled with the name of its column, copied here from the table's head.
document.addEventListener('DOMContentLoaded', () => {
  document.querySelectorAll('.bd-article table.table').forEach((table) => {
    const heads = table.querySelectorAll('thead th');
    const names = [...heads].map((h) => h.textContent.trim());
    table.querySelectorAll('tbody tr').forEach((row) => {
      [...row.children].forEach((cell, i) => { cell.dataset.label = names[i] || ''; });
    });
  });
});
