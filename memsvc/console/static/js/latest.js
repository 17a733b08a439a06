/**
 * Only the latest answer is shown. When a view asks again before an earlier answer came (another
 * entity clicked, a new search run), the earlier answer is dropped when it arrives, whichever of
 * the two arrives last. Pure: no DOM.
 */
export class Latest {
    turn = 0;
    /** Marks a new request; what it answers tells, once the answer is in, whether it is still the latest. */
    begin() {
        this.turn += 1;
        const turn = this.turn;
        return () => turn === this.turn;
    }
}
