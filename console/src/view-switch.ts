/**
 * Which view is on screen, and what leaving it must stop. A view may take a while to draw (it waits
 * on the API); if the user goes elsewhere meanwhile, the late view is stopped as soon as it is
 * drawn, and it never takes the place of the view that followed it. Pure: no DOM, no timers.
 */

import { Latest } from "./latest.js";

export type Leave = (() => void) | void;

export class ViewSwitch {
  private readonly latest = new Latest();
  private leave: Leave = undefined;

  /**
   * Leaves the view on screen, then draws the next with `draw`. Answers whether that view is still
   * the current one once drawn; `draw`'s error is thrown only while it is, since a view left
   * behind has nowhere to show it.
   */
  async enter(draw: () => Promise<Leave> | Leave): Promise<boolean> {
    const isCurrent = this.latest.begin();
    const leaving = this.leave;
    this.leave = undefined;
    if (typeof leaving === "function") leaving();
    let leave: Leave;
    try {
      leave = await draw();
    } catch (error) {
      if (isCurrent()) throw error;
      return false;
    }
    if (!isCurrent()) {
      if (typeof leave === "function") leave();
      return false;
    }
    this.leave = leave;
    return true;
  }
}
